"""Commands that send input to a session: steering, follow-ups, the next turn's queue,
chat-box input, guidance, and the pending queue itself."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

import typer

from duragent.client.api import DuragentClient, RunHandle
from duragent.client.cli import command
from duragent.client.cli.command import MessageArg, SessionArg, client_errors, fail, store_client
from duragent.client.cli.runs import show_run
from duragent.client.cli.views import announce, console, queue_line, say
from duragent.client.errors import QueueItemNotFound
from duragent.client.services import ensure_worker, has_live_worker, local_services
from duragent.domain.guidance import GuidanceIntent
from duragent.settings import Settings

GUIDANCE_INTENTS = ("interrupt", "supplement")


def steer(ctx: typer.Context, session: SessionArg, text: MessageArg) -> None:
    """Steer the running agent: TEXT reaches the model after the current tool calls finish."""
    _signal(ctx.obj, lambda c: c.inputs.steer(session, text), "steering queued")


def follow_up(ctx: typer.Context, session: SessionArg, text: MessageArg) -> None:
    """Queue TEXT for when the running agent would otherwise stop."""
    _signal(ctx.obj, lambda c: c.inputs.follow_up(session, text), "follow-up queued")


def next_turn(ctx: typer.Context, session: SessionArg, text: MessageArg) -> None:
    """Queue TEXT for the session's next run, before its prompt (allowed while busy)."""
    client = store_client(ctx.obj)
    with client_errors():
        item = client.sync.inputs.next_turn(session, text)
    console.print(f"queued for the next run: {item.id}")


def send(
    ctx: typer.Context,
    session: SessionArg,
    text: Annotated[str, typer.Argument(help="The input.")],
    guide: Annotated[bool, typer.Option(help="Busy session: send it as guidance.")] = False,
) -> None:
    """Send input as a chat box does: an idle session starts a run; a busy one queues it,
    to start the next run when the open one ends (with --guide: guidance for the open run).

    A run it starts with a worker of its own (none was polling) is shown until it ends,
    as `run` shows it; with a worker elsewhere the command returns at once."""
    settings: Settings = ctx.obj

    async def main() -> int:
        async with local_services(settings, announce, worker=False) as ready:
            client = await DuragentClient.connect(ready)
            hosted_elsewhere = await has_live_worker(client.temporal, ready)
            async with ensure_worker(ready, announce):
                cursor = await client.events.cursor(session)
                sent = await client.inputs.send(session, text, guidance=guide)
                if not isinstance(sent, RunHandle):
                    when = (
                        "it starts the next run when the open one ends"
                        if sent.kind == "next_turn"
                        else "the open run takes it at its next safe point"
                    )
                    console.print(f"queued ({sent.kind}): {sent.id}; {when}")
                    return 0
                if hosted_elsewhere:
                    console.print(
                        f"started run {sent.run_id}; follow it with: duragent status {session}"
                    )
                    return 0
                # The run's worker lives in this command: leaving now would stall the run
                # until another worker starts, so stay and show it, as `run` does.
                announce(f"Started run {sent.run_id}; showing it here (its worker is ours)")
                return await show_run(client, session, sent, cursor)

    raise typer.Exit(command.run(main()))


def guide(
    ctx: typer.Context,
    session: SessionArg,
    item: Annotated[
        str | None, typer.Argument(help="A pending item's id (see `duragent queue SESSION`).")
    ] = None,
    text: Annotated[
        str | None, typer.Option("--text", help="New text to send as guidance (no ITEM).")
    ] = None,
    intent: Annotated[
        str | None, typer.Option(help="interrupt or supplement (default: from the text).")
    ] = None,
) -> None:
    """Send guidance to the running agent: taken at its nearest safe point.

    `guide SESSION ITEM` turns a queued item into guidance; `guide SESSION --text TEXT`
    sends new text as guidance.
    """
    if (item is None) == (text is None):
        fail("give a queued item's id or --text TEXT (one of them)")
    if intent not in (None, *GUIDANCE_INTENTS):
        fail(f"--intent must be one of {', '.join(GUIDANCE_INTENTS)} (got {intent!r})")
    chosen: GuidanceIntent | None = intent  # type: ignore[assignment]

    async def main() -> None:
        client = await DuragentClient.connect(ctx.obj)
        await client.sessions.get(session)
        if text is None:
            assert item is not None
            try:
                guided = await client.inputs.guide(session, item, intent=chosen)
            except QueueItemNotFound as error:
                fail(f"{error} (new text is sent with: duragent guide SESSION --text TEXT)")
        else:
            guided = await client.inputs.guide_text(session, text, intent=chosen)
        console.print(f"guidance sent: {guided.id}")

    command.run(main())


def queue(
    ctx: typer.Context,
    args: Annotated[list[str], typer.Argument(help="SESSION, or: rm SESSION ITEM")],
) -> None:
    """List a session's pending input (`queue SESSION`) or delete one (`queue rm SESSION ITEM`)."""
    client = store_client(ctx.obj)
    with client_errors():
        if args[0] == "rm" and len(args) == 3:
            client.sync.inputs.delete(args[1], args[2])
            console.print(f"deleted {args[2]}")
            return
        if len(args) != 1:
            fail("expected `queue SESSION` or `queue rm SESSION ITEM`")
        for item in client.sync.inputs.queue(args[0]):
            say(queue_line(item.id, item.kind, item.text))


def _signal(
    settings: Settings, send: Callable[[DuragentClient], Awaitable[str]], done: str
) -> None:
    async def main() -> None:
        client = await DuragentClient.connect(settings)
        console.print(f"{done}: {await send(client)}")

    command.run(main())
