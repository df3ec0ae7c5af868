"""Commands that run a service in the foreground: a worker, the Temporal dev server, the
offline model, the HTTP API."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from duragent.client.api import DuragentClient
from duragent.client.cli import command
from duragent.client.cli.views import announce
from duragent.client.services import ensure_model, ensure_temporal, local_services
from duragent.settings import Settings


def worker(ctx: typer.Context, plugin: command.PluginOption = None) -> None:
    """Run a worker: it hosts session workflows and their activities until interrupted.

    When the default model's provider has neither key nor address (ANTHROPIC_API_KEY and
    ANTHROPIC_BASE_URL for Claude), it serves the offline model itself, for every provider
    without one.
    Ctrl-C or SIGTERM stop it with the tool processes it runs; their runs go on with the
    next worker.
    """
    from duragent.client.workers import run_worker, settle_worker_process

    settings = command.with_plugins(ctx.obj, plugin)  # plugins loaded too
    settle_worker_process()

    async def main() -> None:
        async with ensure_model(settings, announce) as ready:
            announce(f"Worker on task queue {ready.task_queue} at {ready.temporal_address}")
            await run_worker(ready)

    command.run(main())


def dev_server(ctx: typer.Context) -> None:
    """Run the Temporal dev server (with its web UI) in the foreground until interrupted."""
    settings: Settings = ctx.obj

    async def main() -> None:
        async with ensure_temporal(settings, announce):
            await asyncio.Event().wait()

    command.run(main())


def offline_model(
    script: Annotated[
        Path | None, typer.Option(help="Script file (YAML or JSON); default: the demo script.")
    ] = None,
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 0,
) -> None:
    """Serve the offline model: a scripted conversation over the Anthropic Messages API
    and OpenAI's Chat Completions and Responses APIs (at /v1/...)."""
    from duragent.offline_model import serve_forever

    serve_forever(script, port=port)


def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    worker: Annotated[
        bool, typer.Option(help="Run a worker in this process when none is polling.")
    ] = True,
    plugin: command.PluginOption = None,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs).

    Bearer tokens come from DURAGENT_API_TOKENS; with none set, one is made up and printed.
    """
    import secrets

    import uvicorn

    from duragent.api.app import create_app
    from duragent.api.ownership import LOCAL_USER

    settings = command.with_plugins(ctx.obj, plugin)
    tokens = settings.api_tokens
    if not tokens:
        tokens = {secrets.token_urlsafe(24): LOCAL_USER}
        token = next(iter(tokens))
        announce(f"API token (user {LOCAL_USER}, who also sees command-line sessions): {token}")

    class Server(uvicorn.Server):
        """Signals are the command's (they stop the services too), not uvicorn's. Stopping,
        it ends the API's event streams first: a page or an AG-UI client keeps one open
        for as long as a run goes on, and a run that waits for a person (a budget raise,
        an approval) may wait for days; uvicorn would wait for them until its grace
        period is over, then cut them off."""

        def __init__(self, config: uvicorn.Config, client: DuragentClient) -> None:
            super().__init__(config)
            self.client = client

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            # Each stream ends at its next read (within SSE_POLL_S) with a whole response;
            # the listening sockets close before any of them gets there (`shutdown` closes
            # them before its first await), so no page reconnects to this server.
            self.client.events.end_streams()
            await super().shutdown(sockets)

    async def main() -> None:
        async with local_services(settings, announce, worker=worker) as ready:
            client = await DuragentClient.connect(ready)
            # A request still going when the stop comes gets this long to finish.
            config = uvicorn.Config(
                create_app(client, tokens), host=host, port=port, timeout_graceful_shutdown=3
            )
            server = Server(config, client)
            serving = asyncio.create_task(server.serve())
            announce(f"HTTP API on http://{host}:{port} (docs at /docs)")
            try:
                await asyncio.shield(serving)
            except asyncio.CancelledError:  # a signal: finish the HTTP side, then the rest
                server.should_exit = True
                await serving
                raise

    command.run(main())
