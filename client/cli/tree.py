"""Commands on a session's tree of entries: show it, fork, label, compact, move the leaf."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from duragent.client.api import DuragentClient
from duragent.client.cli import command
from duragent.client.cli.command import (
    EntryPrefixArg,
    SessionArg,
    client_errors,
    fail,
    require_session,
    store_client,
)
from duragent.client.cli.views import announce, console, one_line, say
from duragent.client.services import local_services
from duragent.domain.compaction import CompactionSettings
from duragent.domain.entries import SessionEntry


def tree(ctx: typer.Context, session: SessionArg) -> None:
    """The session's tree of entries: branches, labels, compactions; the leaf marked."""
    client = store_client(ctx.obj)
    with client_errors():
        record = client.sync.sessions.get(session)
        entries = client.sync.tree.entries(session)
    labels = client.sync.tree.labels(session)
    # A label entry is stored in the tree like any other (below the leaf it was added
    # at, and what follows goes below it), but it is shown on its target, not as a line:
    # what hangs below a label hangs below the nearest entry above it that is a line,
    # and a leaf that is a label is that entry.
    above: dict[str, str | None] = {}
    children: dict[str | None, list[SessionEntry]] = {}
    for entry in entries:  # stored order: a parent before its children
        parent = entry.parent_id if entry.parent_id in above else None
        if entry.type == "label":
            above[entry.id] = above[parent] if parent is not None else None
            continue
        above[entry.id] = entry.id
        children.setdefault(above[parent] if parent is not None else None, []).append(entry)
    leaf = above.get(record.leaf_id) if record.leaf_id is not None else None
    # Depth-first without recursion: a line of thousands of turns is one deep path.
    stack = [(root, 0) for root in reversed(children.get(None, []))]
    while stack:
        entry, depth = stack.pop()
        line = Text(f"{'  ' * depth}{entry.id[:12]} {one_line(entry)}")
        if entry.id in labels:
            line.append(f" [{labels[entry.id]}]", style="green")
        if entry.id == leaf:
            line.append(" <- leaf", style="bold magenta")
        say(line)
        kids = children.get(entry.id, [])
        deeper = depth + 1 if len(kids) > 1 else depth
        stack.extend((child, deeper) for child in reversed(kids))


def fork(
    ctx: typer.Context,
    session: SessionArg,
    entry: Annotated[str, typer.Argument(help="Entry to fork at (the new session's leaf).")],
    name: Annotated[str | None, typer.Option(help="Name of the new session.")] = None,
) -> None:
    """A new session continuing from ENTRY of SESSION (the workspace is shared)."""
    client = store_client(ctx.obj)
    with client_errors():
        record = client.sync.sessions.fork(
            session, command.entry_id(client, session, entry), name=name
        )
    console.print(f"forked: {record.id}")


def label(
    ctx: typer.Context,
    session: SessionArg,
    entry: EntryPrefixArg,
    text: Annotated[str, typer.Argument(help="The label; empty to clear it.")],
) -> None:
    """Label an entry of the session (shown by `duragent tree`)."""
    entry_id = command.entry_id(store_client(ctx.obj), session, entry)

    async def main() -> None:
        async with local_services(ctx.obj, announce) as ready:
            client = await DuragentClient.connect(ready)
            await client.tree.label(session, entry_id, text or None)
            console.print("labelled")

    command.run(main())


def compact(
    ctx: typer.Context,
    session: SessionArg,
    instructions: Annotated[
        str | None, typer.Option(help="What the summary should focus on.")
    ] = None,
    keep: Annotated[int, typer.Option(help="Recent tokens to keep verbatim.")] = 20_000,
) -> None:
    """Compact an idle session: older context becomes a summary; the UI keeps it all."""
    if keep < 0:
        fail(f"--keep is a number of tokens, 0 or more (got {keep})")
    require_session(store_client(ctx.obj), session)

    async def main() -> int:
        async with local_services(ctx.obj, announce) as ready:
            client = await DuragentClient.connect(ready)
            settings = CompactionSettings(keep_recent_tokens=keep)
            result = await client.tree.compact(
                session, instructions=instructions, settings=settings
            )
            if not result.compacted:
                console.print(result.reason)
                return 1
            # The summary is a model call: say what it cost (it counts in the session's).
            spent = f", the summary {result.cost.text}" if result.cost is not None else ""
            console.print(
                f"compacted ({result.tokens_before} tokens before{spent}): {result.entry_id}"
            )
            return 0

    raise typer.Exit(command.run(main()))


def goto(
    ctx: typer.Context,
    session: SessionArg,
    entry: EntryPrefixArg,
    summarize: Annotated[
        bool, typer.Option(help="Summarise the branch left behind for the model.")
    ] = False,
) -> None:
    """Move the session's leaf to ENTRY (idle only).

    Choosing a user message moves to its parent and prints its text to edit and send again.
    """
    entry_id = command.entry_id(store_client(ctx.obj), session, entry)

    async def main() -> None:
        async with local_services(ctx.obj, announce) as ready:
            client = await DuragentClient.connect(ready)
            moved = await client.tree.navigate(session, entry_id, summarize=summarize)
            console.print(f"leaf: {moved.leaf_id}")
            if moved.edit_text is not None:
                console.print(Text(f"edit and send again: {moved.edit_text}"))

    command.run(main())
