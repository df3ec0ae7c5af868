"""The command that moves a session to another host."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from duragent.client.api import DuragentClient
from duragent.client.cli import command
from duragent.client.cli.command import SessionArg, require_session, store_client
from duragent.client.cli.views import say


def move(
    ctx: typer.Context,
    session: SessionArg,
    host: Annotated[str, typer.Argument(help="The host whose workers run its tools from now on.")],
    no_copy: Annotated[
        bool,
        typer.Option(
            "--no-copy",
            help="Record the new host without copying the workspace: it is on storage both "
            "hosts share, or the old host is gone.",
        ),
    ] = False,
    workspace: Annotated[
        str | None,
        typer.Option(help="The workspace's folder on the new host (default: the same path)."),
    ] = None,
) -> None:
    """Move an idle session to HOST: copy its workspace there from the host it is on (both
    hosts' workers must be up; at most 256 MiB, into a missing or empty folder), then
    record HOST, where its runs' tool calls go from now on. Refused while a run is in
    progress; the old host's copy is left as it was."""
    require_session(store_client(ctx.obj), session)

    async def main() -> None:
        client = await DuragentClient.connect(ctx.obj)
        moved = await client.hosts.move(session, host, copy=not no_copy, workspace=workspace)
        copied = (
            f"copied {moved.copied_files} file(s), {moved.copied_bytes} bytes"
            if moved.copied_files or moved.copied_bytes
            else "nothing copied"
        )
        say(Text(f"session {session} is on host {moved.host} ({moved.workspace}); {copied}"))

    command.run(main())
