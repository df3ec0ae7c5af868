"""The `duragent` command line."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from client import lifecycle
from client.api import DuragentClient, RunHandle
from client.errors import DuragentError, EntryNotInSession
from client.render import EventPrinter
from client.services import ensure_model, ensure_temporal, local_services
from domain.compaction import CompactionSettings
from domain.config import SessionConfig
from domain.entries import CompactionEntry, LeafEntry, MessageEntry, SessionEntry
from domain.messages import AssistantMessage, ToolResultMessage, text_of
from settings import Settings

app = typer.Typer(
    help="duragent: a durable, steerable agent harness on Temporal.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",  # docstring paragraphs wrap to the terminal
)
console = Console()
err = Console(stderr=True)
T = TypeVar("T")

EXIT_CODES = {"completed": 0, "error": 1, "aborted": 130}


@app.callback()
def global_options(
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
    """Run a command's coroutine: Ctrl-C, SIGTERM and SIGHUP stop what it started, then
    end the process by that signal (`client.lifecycle`)."""
    try:
        return lifecycle.run(coro, notice=_announce)
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
    """Run PROMPT in a session and stream what happens; exit with the run's outcome
    (0 completed, 1 error, 130 aborted).

    Starts a Temporal dev server and a worker in this process when none is reachable, and
    for that worker the offline model when ANTHROPIC_API_KEY is unset. Ctrl-C or SIGTERM
    stop what it started; the run stays open for the next worker.
    """
    settings: Settings = ctx.obj

    async def start(client: DuragentClient) -> tuple[str, RunHandle]:
        if session is None:
            record = client.create_session(workspace=workspace, name=name)
            _announce(f"Session {record.id} (workspace {record.workspace})")
        else:
            record = client.get_session(session)
        return record.id, await client.prompt(record.id, prompt, max_turns=max_turns)

    raise typer.Exit(_run(_follow(settings, start)))


@app.command()
def skill(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    name: Annotated[str, typer.Argument(help="Skill name (.duragent/skills/NAME.md).")],
    args: Annotated[list[str] | None, typer.Argument(help="Text passed after the skill.")] = None,
) -> None:
    """Run a skill in a session and stream what happens."""

    async def start(client: DuragentClient) -> tuple[str, RunHandle]:
        return session, await client.skill(session, name, args or [])

    raise typer.Exit(_run(_follow(ctx.obj, start)))


@app.command()
def template(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    name: Annotated[str, typer.Argument(help="Template name (.duragent/prompts/NAME.md).")],
    args: Annotated[
        list[str] | None, typer.Argument(help="Positional arguments ($1, $2, $@).")
    ] = None,
) -> None:
    """Run a prompt template with arguments in a session and stream what happens."""

    async def start(client: DuragentClient) -> tuple[str, RunHandle]:
        return session, await client.prompt_from_template(session, name, args or [])

    raise typer.Exit(_run(_follow(ctx.obj, start)))


async def _follow(
    settings: Settings, start: Callable[[DuragentClient], Awaitable[tuple[str, RunHandle]]]
) -> int:
    """Start a run (services started as needed), print its events, return its exit code."""
    async with local_services(settings, _announce) as ready:
        client = await DuragentClient.connect(ready)
        session_id, handle = await start(client)
        printer = EventPrinter(console, session_id)
        cursor = client.cursor(session_id)
        try:
            async for event in client.events(session_id, run_id=handle.run_id, after=cursor):
                printer.show(event)
        except asyncio.CancelledError:  # a signal: services stop, the run stays open
            printer.close()
            _announce(
                f"Stopped. Run {handle.run_id} stays open and goes on with the next worker "
                f"(duragent worker); end it with: duragent abort {session_id}"
            )
            raise
        finally:
            printer.close()  # also on an error: the terminal gets its cursor back
        result = await handle.result()
        _announce(f"Inspect it: duragent show {session_id}")
        return EXIT_CODES[result.status]


@app.command()
def steer(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    text: Annotated[str, typer.Argument(help="The message.")],
) -> None:
    """Steer the running agent: TEXT reaches the model after the current tool calls finish."""
    _signal(ctx.obj, lambda c: c.steer(session, text), "steering queued")


@app.command("follow-up")
def follow_up(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    text: Annotated[str, typer.Argument(help="The message.")],
) -> None:
    """Queue TEXT for when the running agent would otherwise stop."""
    _signal(ctx.obj, lambda c: c.follow_up(session, text), "follow-up queued")


@app.command("next-turn")
def next_turn(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    text: Annotated[str, typer.Argument(help="The message.")],
) -> None:
    """Queue TEXT for the session's next run, before its prompt (allowed while busy)."""
    client = _store_client(ctx.obj)
    try:
        item = client.next_turn(session, text)
    except DuragentError as error:
        err.print(f"[red]error:[/] {escape(str(error))}")
        raise typer.Exit(2) from None
    console.print(f"queued for the next run: {item.id}")


@app.command()
def send(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    text: Annotated[str, typer.Argument(help="The input.")],
    guide: Annotated[bool, typer.Option(help="Busy session: send it as guidance.")] = False,
) -> None:
    """Send input as a chat box does: an idle session starts a run, a busy one queues it."""
    settings: Settings = ctx.obj

    async def main() -> None:
        async with local_services(settings, _announce) as ready:
            client = await DuragentClient.connect(ready)
            sent = await client.send_input(session, text, guidance=guide)
            if isinstance(sent, RunHandle):
                console.print(
                    f"started run {sent.run_id}; follow it with: duragent status {session}"
                )
            else:
                console.print(f"queued ({sent.kind}): {sent.id}")

    _run(main())


@app.command()
def guide(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    item_or_text: Annotated[str, typer.Argument(help="A queued item's id, or new text.")],
    intent: Annotated[
        str | None, typer.Option(help="interrupt or supplement (default: from the text).")
    ] = None,
) -> None:
    """Send guidance to the running agent: taken at its nearest safe point."""

    async def main() -> None:
        client = await DuragentClient.connect(ctx.obj)
        pending = {item.id for item in client.queue_items(session)}
        item_id = (
            item_or_text if item_or_text in pending else client.next_turn(session, item_or_text).id
        )
        if intent not in (None, "interrupt", "supplement"):
            raise typer.BadParameter("--intent is interrupt or supplement")
        item = await client.guide(session, item_id, intent=intent)  # type: ignore[arg-type]
        console.print(f"guidance sent: {item.id}")

    _run(main())


@app.command()
def queue(
    ctx: typer.Context,
    args: Annotated[list[str], typer.Argument(help="SESSION, or: rm SESSION ITEM")],
) -> None:
    """List a session's pending input (`queue SESSION`) or delete one (`queue rm SESSION ITEM`)."""
    client = _store_client(ctx.obj)
    try:
        if args[0] == "rm" and len(args) == 3:
            client.delete_queue_item(args[1], args[2])
            console.print(f"deleted {args[2]}")
            return
        if len(args) != 1:
            raise typer.BadParameter("expected SESSION, or rm SESSION ITEM")
        for item in client.queue_items(args[0]):
            console.print(f"{item.id}  {item.kind:<9} {escape(item.text)}")
    except DuragentError as error:
        err.print(f"[red]error:[/] {escape(str(error))}")
        raise typer.Exit(2) from None


@app.command()
def configure(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    model: Annotated[str | None, typer.Option(help="Model for the next turns.")] = None,
    thinking: Annotated[
        str | None, typer.Option(help="Thinking level: off, minimal, low, medium, high.")
    ] = None,
    tools: Annotated[
        str | None, typer.Option(help="Active tools, comma-separated (empty: none).")
    ] = None,
    system_prompt: Annotated[str | None, typer.Option(help="System prompt.")] = None,
    steering_mode: Annotated[
        str | None, typer.Option(help="Steering queue mode: all or one-at-a-time.")
    ] = None,
    follow_up_mode: Annotated[
        str | None, typer.Option(help="Follow-up queue mode: all or one-at-a-time.")
    ] = None,
) -> None:
    """Change a session's config. A running run uses it from its next turn."""
    fields = {
        "model": model,
        "thinking_level": thinking,
        "active_tools": None if tools is None else [t for t in tools.split(",") if t],
        "system_prompt": system_prompt,
        "steering_mode": steering_mode,
        "follow_up_mode": follow_up_mode,
    }
    settings: Settings = ctx.obj

    async def main() -> None:
        async with local_services(settings, _announce) as ready:
            client = await DuragentClient.connect(ready)
            await client.configure(session, **{k: v for k, v in fields.items() if v is not None})
            console.print(_config_line((await client.status(session)).config))

    _run(main())


@app.command()
def status(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Phase, config, queued messages and pending writes of a session."""

    async def main() -> None:
        client = await DuragentClient.connect(ctx.obj)
        state = await client.status(session)
        if as_json:
            view = {
                "phase": state.phase,
                "config": state.config.model_dump(),
                "run": state.run.model_dump(mode="json") if state.run else None,
                "next_turn": [i.model_dump(mode="json") for i in state.next_turn],
            }
            console.out(json.dumps(view, indent=2))
            return
        run_line = f" (run {state.run.run_id}, turn {state.run.turn})" if state.run else ""
        console.print(f"[bold]{state.phase}[/]{run_line}")
        console.print(_config_line(state.config))
        if state.run:
            for item in state.run.steering:
                console.print(f"  steering: {escape(item.text)}")
            for item in state.run.follow_ups:
                console.print(f"  follow-up: {escape(item.text)}")
            for entry in state.run.pending_writes:
                console.print(f"  pending write: {entry.type}")
        for queued in state.next_turn:
            console.print(f"  next turn: {escape(queued.text)}")

    _run(main())


@app.command()
def abort(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
) -> None:
    """Abort the running agent: running tools are killed, finished results kept."""
    settings: Settings = ctx.obj

    async def main() -> int:
        async with local_services(settings, _announce) as ready:
            client = await DuragentClient.connect(ready)
            result = await client.abort(session)
            console.print(f"run {result.run_id} aborted after {result.turns} turn(s)")
            for text in [*result.cleared_steering, *result.cleared_follow_ups]:
                console.print(f"  dropped: {escape(text)}")
            return 0

    raise typer.Exit(_run(main()))


def _signal(
    settings: Settings, send: Callable[[DuragentClient], Awaitable[str]], done: str
) -> None:
    async def main() -> None:
        client = await DuragentClient.connect(settings)
        console.print(f"{done}: {await send(client)}")

    _run(main())


def _config_line(config: SessionConfig) -> str:
    tools = "all" if config.active_tools is None else ",".join(config.active_tools) or "none"
    return (
        f"model {config.model}, thinking {config.thinking_level}, tools {tools}, "
        f"steering {config.steering_mode}, follow-ups {config.follow_up_mode}"
    )


@app.command()
def worker(ctx: typer.Context) -> None:
    """Run a worker: it hosts session workflows and their activities until interrupted.

    With no ANTHROPIC_API_KEY and no ANTHROPIC_BASE_URL it serves the offline model itself.
    Ctrl-C or SIGTERM stop it with the tool processes it runs; their runs go on with the
    next worker.
    """
    from worker import run_worker

    settings: Settings = ctx.obj

    async def main() -> None:
        async with ensure_model(settings, _announce) as ready:
            _announce(f"Worker on task queue {ready.task_queue} at {ready.temporal_address}")
            await run_worker(ready)

    _run(main())


@app.command("dev-server")
def dev_server(ctx: typer.Context) -> None:
    """Run the Temporal dev server (with its web UI) in the foreground until interrupted."""
    settings: Settings = ctx.obj

    async def main() -> None:
        async with ensure_temporal(settings, _announce):
            await asyncio.Event().wait()

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
def serve(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8000,
    worker: Annotated[
        bool, typer.Option(help="Run a worker in this process when none is polling.")
    ] = True,
) -> None:
    """Serve the HTTP API (OpenAPI at /docs).

    Bearer tokens come from DURAGENT_API_TOKENS; with none set, one is made up and printed.
    """
    import secrets

    import uvicorn

    from api.app import create_app

    settings: Settings = ctx.obj
    tokens = settings.api_tokens
    if not tokens:
        tokens = {secrets.token_urlsafe(24): "default"}
        _announce(f"API token (user default): {next(iter(tokens))}")

    class Server(uvicorn.Server):
        """Signals are the command's (they stop the services too), not uvicorn's."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    async def main() -> None:
        async with local_services(settings, _announce, worker=worker) as ready:
            client = await DuragentClient.connect(ready)
            # Open event streams end within the grace period instead of holding the stop.
            config = uvicorn.Config(
                create_app(client, tokens), host=host, port=port, timeout_graceful_shutdown=3
            )
            server = Server(config)
            serving = asyncio.create_task(server.serve())
            _announce(f"HTTP API on http://{host}:{port} (docs at /docs)")
            try:
                await asyncio.shield(serving)
            except asyncio.CancelledError:  # a signal: finish the HTTP side, then the rest
                server.should_exit = True
                await serving
                raise

    _run(main())


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


@app.command()
def history(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    run: Annotated[str | None, typer.Option("--run", help="Only this run (its run id).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the timelines as JSON.")] = False,
) -> None:
    """What happened in a session's runs, read from their Temporal workflow histories.

    Model calls with usage, tool calls with outcome and duration, save points, retries,
    signals and when they were consumed, aborts and continue-as-new links, with times.
    """
    from client.history import render, session_timelines

    settings: Settings = ctx.obj
    host, _, port = settings.temporal_address.rpartition(":")
    local = host in ("127.0.0.1", "localhost", "[::1]") and port.isdigit()
    ui_base = f"http://{host}:{int(port) + 1000}" if local else None  # the dev server's UI

    async def main() -> int:
        _store_client(settings).get_session(session)  # SessionNotFound for a wrong id
        # The histories live in the dev server's file: start it if it is not running.
        async with ensure_temporal(settings, _announce):
            client = await DuragentClient.connect(settings)
            timelines = await session_timelines(client.temporal, session, run, ui_base=ui_base)
        if as_json:
            console.out(json.dumps([t.model_dump(mode="json") for t in timelines], indent=2))
        elif timelines:
            render(timelines, console)
        else:
            err.print(f"no workflow history for {f'run {run}' if run else 'this session'}")
        return 0 if timelines else 1

    raise typer.Exit(_run(main()))


@app.command()
def tree(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
) -> None:
    """The session's tree of entries: branches, labels, compactions; the leaf marked."""
    client = _store_client(ctx.obj)
    try:
        record = client.get_session(session)
        entries = client.entries(session)
    except DuragentError as error:
        err.print(f"[red]error:[/] {escape(str(error))}")
        raise typer.Exit(2) from None
    labels = client.labels(session)
    children: dict[str | None, list[SessionEntry]] = {}
    for entry in entries:
        if entry.type != "label":
            children.setdefault(entry.parent_id, []).append(entry)

    def walk(parent: str | None, depth: int) -> None:
        for entry in children.get(parent, []):
            mark = " [bold magenta]<- leaf[/]" if entry.id == record.leaf_id else ""
            label = f" [green]\\[{escape(labels[entry.id])}][/]" if entry.id in labels else ""
            console.print(f"{'  ' * depth}{entry.id[:12]} {escape(_one_line(entry))}{label}{mark}")
            walk(entry.id, depth + 1 if len(children.get(entry.id, [])) > 1 else depth)

    walk(None, 0)


def _one_line(entry: SessionEntry) -> str:
    if isinstance(entry, MessageEntry):
        message = entry.message
        if isinstance(message, AssistantMessage):
            calls = ", ".join(c.name for c in message.tool_calls)
            text = text_of(message.content) or (f"calls {calls}" if calls else message.stop_reason)
            return f"assistant: {text[:70]}"
        if isinstance(message, ToolResultMessage):
            return f"{message.tool_name} result{' (error)' if message.is_error else ''}"
        return f"{message.role}: {text_of(message.content)[:70]}"
    if isinstance(entry, CompactionEntry):
        return f"compaction (kept from {entry.first_kept_entry_id[:12]})"
    if isinstance(entry, LeafEntry):
        return f"left for {entry.target_id[:12]}"
    return entry.type


@app.command()
def fork(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    entry: Annotated[str, typer.Argument(help="Entry to fork at (the new session's leaf).")],
    name: Annotated[str | None, typer.Option(help="Name of the new session.")] = None,
) -> None:
    """A new session continuing from ENTRY of SESSION (the workspace is shared)."""
    client = _store_client(ctx.obj)
    try:
        record = client.fork(session, _entry_id(client, session, entry), name=name)
    except DuragentError as error:
        err.print(f"[red]error:[/] {escape(str(error))}")
        raise typer.Exit(2) from None
    console.print(f"forked: {record.id}")


@app.command()
def label(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    entry: Annotated[str, typer.Argument(help="Entry id (or a unique prefix).")],
    text: Annotated[str, typer.Argument(help="The label; empty to clear it.")],
) -> None:
    """Label an entry of the session (shown by `duragent tree`)."""

    async def main() -> None:
        async with local_services(ctx.obj, _announce) as ready:
            client = await DuragentClient.connect(ready)
            await client.set_label(session, _entry_id(client, session, entry), text or None)
            console.print("labelled")

    _run(main())


@app.command()
def compact(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    instructions: Annotated[
        str | None, typer.Option(help="What the summary should focus on.")
    ] = None,
    keep: Annotated[int, typer.Option(help="Recent tokens to keep verbatim.")] = 20_000,
) -> None:
    """Compact an idle session: older context becomes a summary; the UI keeps it all."""

    async def main() -> int:
        async with local_services(ctx.obj, _announce) as ready:
            client = await DuragentClient.connect(ready)
            settings = CompactionSettings(keep_recent_tokens=keep)
            result = await client.compact(session, instructions=instructions, settings=settings)
            if not result.compacted:
                console.print(result.reason)
                return 1
            console.print(f"compacted ({result.tokens_before} tokens before): {result.entry_id}")
            return 0

    raise typer.Exit(_run(main()))


@app.command()
def goto(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    entry: Annotated[str, typer.Argument(help="Entry id (or a unique prefix).")],
    summarize: Annotated[
        bool, typer.Option(help="Summarise the branch left behind for the model.")
    ] = False,
) -> None:
    """Move the session's leaf to ENTRY (idle only).

    Choosing a user message moves to its parent and prints its text to edit and send again.
    """

    async def main() -> None:
        async with local_services(ctx.obj, _announce) as ready:
            client = await DuragentClient.connect(ready)
            moved = await client.navigate(
                session, _entry_id(client, session, entry), summarize=summarize
            )
            console.print(f"leaf: {moved.leaf_id}")
            if moved.edit_text is not None:
                console.print(f"edit and send again: {escape(moved.edit_text)}")

    _run(main())


def _entry_id(client: DuragentClient, session: str, prefix: str) -> str:
    """The entry `prefix` names (ids are long; `tree` shows their first 12 characters)."""
    matches = [e.id for e in client.entries(session) if e.id.startswith(prefix)]
    if len(matches) != 1:
        found = "no entry" if not matches else f"{len(matches)} entries"
        raise EntryNotInSession(session, f"{prefix}* ({found})")
    return matches[0]


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
    lifecycle.exit_after(app)


if __name__ == "__main__":
    main()
