"""The `duragent` command line."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from client.api import DuragentClient
from client.errors import DuragentError
from client.render import EventPrinter
from client.services import ensure_model, ensure_temporal, local_services
from domain.entries import MessageEntry, SessionEntry
from domain.messages import AssistantMessage, ToolResultMessage, text_of
from settings import Settings

app = typer.Typer(
    help="duragent: a durable, steerable agent harness on Temporal.",
    no_args_is_help=True,
    add_completion=False,
)
console = Console()
err = Console(stderr=True)
T = TypeVar("T")

EXIT_CODES = {"completed": 0, "error": 1, "aborted": 130}


@app.callback()
def configure(
    ctx: typer.Context,
    home: Annotated[
        Path | None, typer.Option(help="State directory [env DURAGENT_HOME, default ./.duragent]")
    ] = None,
    database_url: Annotated[
        str | None, typer.Option(help="SQLAlchemy URL of the store [env DURAGENT_DATABASE_URL]")
    ] = None,
    temporal_address: Annotated[
        str | None, typer.Option(help="Temporal frontend host:port [env TEMPORAL_ADDRESS]")
    ] = None,
    namespace: Annotated[
        str | None, typer.Option(help="Temporal namespace [env TEMPORAL_NAMESPACE]")
    ] = None,
    task_queue: Annotated[
        str | None, typer.Option(help="Task queue of the workers [env DURAGENT_TASK_QUEUE]")
    ] = None,
    model: Annotated[
        str | None, typer.Option(help="Model for new sessions [env DURAGENT_MODEL]")
    ] = None,
) -> None:
    ctx.obj = Settings.from_env(
        home=home,
        database_url=database_url,
        temporal_address=temporal_address,
        temporal_namespace=namespace,
        task_queue=task_queue,
        model=model,
    )


def _run(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return asyncio.run(coro)
    except DuragentError as error:
        err.print(f"[red]error:[/] {escape(str(error))}")
        raise typer.Exit(2) from None


def _announce(message: str) -> None:
    err.print(f"[dim]{escape(message)}[/]")


@app.command()
def run(
    ctx: typer.Context,
    prompt: Annotated[str, typer.Argument(help="What the agent should do.")],
    session: Annotated[
        str | None, typer.Option(help="Continue this session instead of starting a new one.")
    ] = None,
    workspace: Annotated[
        Path | None,
        typer.Option(help="Directory the tools work in (new sessions; default: a fresh one)."),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Name for a new session.")] = None,
    max_turns: Annotated[int | None, typer.Option(help="Stop after this many turns.")] = None,
) -> None:
    """Run PROMPT in a session and stream what happens; exit with the run's outcome.

    Starts a Temporal dev server, the offline model (when ANTHROPIC_API_KEY is unset) and a
    worker in this process when none is reachable.
    """
    settings: Settings = ctx.obj

    async def main() -> int:
        async with local_services(settings, _announce) as ready:
            client = await DuragentClient.connect(ready)
            if session is None:
                record = client.create_session(workspace=workspace, name=name)
                _announce(f"Session {record.id} (workspace {record.workspace})")
            else:
                record = client.get_session(session)
            handle = await client.prompt(record.id, prompt, max_turns=max_turns)
            printer = EventPrinter(console)
            async for event in client.events(
                record.id, run_id=handle.run_id, after=_cursor(client, record.id)
            ):
                printer.show(event)
            result = await handle.result()
            _announce(f"Inspect it: duragent show {record.id}")
            return EXIT_CODES[result.status]

    raise typer.Exit(_run(main()))


def _cursor(client: DuragentClient, session_id: str) -> int:
    """The newest event before this run, so the stream shows this run only."""
    from store import events

    with client.db.transaction() as db:
        latest = events.read_events(db, session_id, after=0, limit=1_000_000)
    return latest[-1].seq if latest else 0


@app.command()
def worker(ctx: typer.Context) -> None:
    """Run a worker: it hosts session workflows and their activities until interrupted.

    With no ANTHROPIC_API_KEY and no ANTHROPIC_BASE_URL it serves the offline model itself.
    """
    from worker import run_worker

    settings: Settings = ctx.obj

    async def main() -> None:
        async with ensure_model(settings, _announce) as ready:
            _announce(f"Worker on task queue {ready.task_queue} at {ready.temporal_address}")
            await run_worker(ready)

    with contextlib.suppress(KeyboardInterrupt):
        _run(main())


@app.command("dev-server")
def dev_server(ctx: typer.Context) -> None:
    """Run the Temporal dev server (with its web UI) in the foreground until interrupted."""
    settings: Settings = ctx.obj

    async def main() -> None:
        async with ensure_temporal(settings, _announce):
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        _run(main())


@app.command("offline-model")
def offline_model(
    script: Annotated[
        Path | None, typer.Option(help="Script file (YAML or JSON); default: the demo script.")
    ] = None,
    port: Annotated[int, typer.Option(help="Port to listen on (0: any free port).")] = 0,
) -> None:
    """Serve the offline model: the Anthropic Messages API playing a scripted conversation."""
    from offline_model import serve_forever

    serve_forever(script, port=port)


@app.command()
def sessions(ctx: typer.Context) -> None:
    """List sessions, most recently active first."""
    settings: Settings = ctx.obj
    client = _store_client(settings)
    table = Table("name", "model", "updated", "workspace")
    table.add_column("session", no_wrap=True, min_width=32)
    for record in client.list_sessions():
        table.add_row(
            record.name or "",
            record.config.model,
            _when(record.updated_at),
            record.workspace,
            record.id,
        )
    console.print(table)


@app.command()
def show(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print entries as JSON.")] = False,
) -> None:
    """Show a session: its runs and the transcript of its current branch."""
    settings: Settings = ctx.obj
    client = _store_client(settings)
    try:
        record = client.get_session(session)
    except DuragentError as error:
        err.print(f"[red]error:[/] {escape(str(error))}")
        raise typer.Exit(2) from None
    path = client.path(session)
    if as_json:
        console.out(json.dumps([e.model_dump(mode="json") for e in path], indent=2))
        return
    console.print(f"[bold]session[/] {record.id}  {record.name or ''}")
    console.print(f"workspace {record.workspace}   model {record.config.model}")
    runs = Table("status", "turns", "tokens", "started", "error")
    runs.add_column("run", no_wrap=True, min_width=32)
    for run_record in client.runs(session):
        runs.add_row(
            run_record.status,
            str(run_record.turns),
            str(run_record.usage.total_tokens),
            _when(run_record.started_at),
            run_record.error or "",
            run_record.run_id,
        )
    console.print(runs)
    for entry in path:
        _print_entry(entry)


def _print_entry(entry: SessionEntry) -> None:
    if not isinstance(entry, MessageEntry):
        console.print(f"[dim]· {entry.type}[/]")
        return
    message = entry.message
    if isinstance(message, AssistantMessage):
        text = text_of(message.content)
        if text:
            console.print(f"[bold cyan]assistant[/] {escape(text)}")
        for call in message.tool_calls:
            console.print(f"  [yellow]→ {call.name}[/] {escape(json.dumps(call.arguments)[:200])}")
        if message.error_message:
            console.print(f"[red]model error:[/] {escape(message.error_message)}")
    elif isinstance(message, ToolResultMessage):
        mark = "[red]✗[/]" if message.is_error else "[green]✓[/]"
        text = text_of(message.content).strip()
        console.print(f"  {mark} {message.tool_name} [dim]{escape(text[:300])}[/]")
    else:
        console.print(f"[bold green]{message.role}[/] {escape(text_of(message.content))}")


def _store_client(settings: Settings) -> DuragentClient:
    """A client for store-only commands: they work without Temporal."""
    from client.connection import open_store

    return DuragentClient(None, open_store(settings), settings)  # type: ignore[arg-type]


def _when(ms: int) -> str:
    import datetime

    return datetime.datetime.fromtimestamp(ms / 1000).strftime("%Y-%m-%d %H:%M:%S")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
