"""Commands that move whole sessions between deployments: export one as a file, import
one (ours, or a pi session file)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, BinaryIO

import typer

from duragent.client.cli.command import SessionArg, client_errors, fail, store_client
from duragent.client.cli.views import console, err
from duragent.domain.session_file_checks import MAX_FILE_BYTES


def export(ctx: typer.Context, session: SessionArg) -> None:
    """Write the session's whole tree to stdout as JSON Lines: `duragent export S > s.jsonl`.

    Line 1 is a header (format `duragent-session`, its version, where it came from, the
    session's name and config, its leaf); then every entry of every branch, in stored
    order: messages with their usage, config changes, compactions, branch summaries,
    labels, leaf moves, custom entries. It holds no owner, workspace, host, token or key:
    `duragent import` makes a session of it on any deployment.
    """
    client = store_client(ctx.obj)
    with client_errors():
        lines = client.sync.session_files.export(session)
    out = sys.stdout
    out.writelines(lines)
    out.flush()


def import_session(
    ctx: typer.Context,
    file: Annotated[
        Path, typer.Argument(help="A session file (`duragent export`'s, or pi's); - for stdin.")
    ],
    keep_ids: Annotated[
        bool,
        typer.Option(
            "--keep-ids",
            help="Keep the file's session and entry ids, and the session's creation time "
            "(refused, importing nothing, when this deployment has any of the ids); new ids "
            "otherwise.",
        ),
    ] = False,
    name: Annotated[str | None, typer.Option(help="Name of the new session.")] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(help="Its workspace folder (default: a fresh one under the state dir)."),
    ] = None,
) -> None:
    """Make a session of a session file: a `duragent export` file, or one of pi's `.jsonl`
    session files (what of pi's does not map: docs/cli.md, "Portable sessions").

    The whole file is checked first: a malformed, oversized or hostile one (bad JSON,
    unknown entry types, bad ids, a parent or a label's target that is no earlier entry)
    is refused with its line number and the reason, and nothing is stored; a good one is
    stored in one transaction. The model then sees the same context it saw before.

    Prints the new session's id; what of the file was dropped, kept as custom entries or
    changed (a pi file's), one line each with how often, goes to stderr.
    """
    client = store_client(ctx.obj, create=True)
    data = _read(file)
    with client_errors():
        imported = client.sync.session_files.import_file(
            data, keep_ids=keep_ids, name=name, workspace=workspace
        )
    source = "pi session" if imported.kind == "pi" else "session"
    for note in imported.notes:
        err.print(note.text(), markup=False, highlight=False)
    console.print(f"imported {source} with {imported.entries} entries: {imported.session.id}")


def _read(file: Path) -> bytes:
    """The file's bytes, or as many as make it too large (the import refuses it)."""
    try:
        if str(file) == "-":
            return _bounded(sys.stdin.buffer)
        with file.open("rb") as stream:
            return _bounded(stream)
    except OSError as error:
        fail(f"cannot read {file}: {error.strerror or error}")


def _bounded(stream: BinaryIO) -> bytes:
    return stream.read(MAX_FILE_BYTES + 1)
