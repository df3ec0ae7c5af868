"""The `duragent` command line."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from activities.tools import default_tool_names
from client import lifecycle
from client.api import DuragentClient, RunHandle
from client.errors import DuragentError, QueueItemNotFound
from client.render import EventPrinter
from client.services import (
    ensure_model,
    ensure_temporal,
    ensure_worker,
    has_live_worker,
    local_services,
)
from client.tables import Column, print_table
from domain.compaction import CompactionSettings
from domain.config import QUEUE_MODES, THINKING_LEVELS, SessionConfig, check_tool_names
from domain.entries import CompactionEntry, LeafEntry, MessageEntry, SessionEntry
from domain.guidance import GuidanceIntent
from domain.messages import AssistantMessage, ToolResultMessage, text_of
from settings import Settings

app = typer.Typer(
    help="duragent: a durable, steerable agent harness on Temporal.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="markdown",  # docstring paragraphs wrap to the terminal
)
console = Console()
err = Console(stderr=True, soft_wrap=True)  # an error is one line, however long
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
    try:
        ctx.obj = Settings.from_env(
            home=home,
            database_url=database_url,
            temporal_address=temporal_address,
            temporal_namespace=namespace,
            task_queue=task_queue,
            model=model,
        )
    except ValueError as error:  # pydantic's ValidationError is one too
        _fail(f"bad setting: {_setting_error(error)}")


def _setting_error(error: ValueError) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e['input']!r})"
            for e in error.errors(include_url=False)
        )
    return str(error)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a command's coroutine: Ctrl-C, SIGTERM and SIGHUP stop what it started, then
    end the process by that signal (`client.lifecycle`)."""
    try:
        return lifecycle.run(coro, notice=_announce)
    except DuragentError as error:
        err.print(f"[red]error:[/] {escape(str(error))}")
        raise typer.Exit(2) from None


def _fail(message: str) -> NoReturn:
    """End the command over a client error: one line naming what was wrong, exit 2."""
    err.print(f"[red]error:[/] {escape(message)}")
    raise typer.Exit(2)


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
    if max_turns is not None and max_turns < 1:
        _fail(f"--max-turns is at least 1 (got {max_turns})")

    def open_session(client: DuragentClient) -> str:
        if session is None:
            record = client.create_session(workspace=workspace, name=name)
            _announce(f"Session {record.id} (workspace {record.workspace})")
            return record.id
        return client.get_session(session).id

    async def start(client: DuragentClient, session_id: str) -> RunHandle:
        return await client.prompt(session_id, prompt, max_turns=max_turns)

    raise typer.Exit(_run(_follow(settings, open_session, start)))


@app.command()
def skill(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    name: Annotated[str, typer.Argument(help="Skill name (.duragent/skills/NAME.md).")],
    args: Annotated[list[str] | None, typer.Argument(help="Text passed after the skill.")] = None,
) -> None:
    """Run a skill in a session and stream what happens."""

    async def start(client: DuragentClient, session_id: str) -> RunHandle:
        return await client.skill(session_id, name, args or [])

    raise typer.Exit(_run(_follow(ctx.obj, lambda client: client.get_session(session).id, start)))


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

    async def start(client: DuragentClient, session_id: str) -> RunHandle:
        return await client.prompt_from_template(session_id, name, args or [])

    raise typer.Exit(_run(_follow(ctx.obj, lambda client: client.get_session(session).id, start)))


async def _follow(
    settings: Settings,
    open_session: Callable[[DuragentClient], str],
    start: Callable[[DuragentClient, str], Awaitable[RunHandle]],
) -> int:
    """Start a run (services started as needed), print its events, return its exit code."""
    async with local_services(settings, _announce) as ready:
        client = await DuragentClient.connect(ready)
        session_id = open_session(client)
        cursor = client.cursor(session_id)  # before the start: no event of the run is missed
        return await _show_run(client, session_id, await start(client, session_id), cursor)


async def _show_run(client: DuragentClient, session_id: str, handle: RunHandle, cursor: int) -> int:
    """Print a run's events from `cursor` until it ends; its exit code."""
    printer = EventPrinter(console, session_id)
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
    """Send input as a chat box does: an idle session starts a run, a busy one queues it.

    A run it starts with a worker of its own (none was polling) is shown until it ends,
    as `run` shows it; with a worker elsewhere the command returns at once."""
    settings: Settings = ctx.obj

    async def main() -> int:
        async with local_services(settings, _announce, worker=False) as ready:
            client = await DuragentClient.connect(ready)
            hosted_elsewhere = await has_live_worker(client.temporal, ready)
            async with ensure_worker(ready, _announce):
                cursor = client.cursor(session)
                sent = await client.send_input(session, text, guidance=guide)
                if not isinstance(sent, RunHandle):
                    console.print(f"queued ({sent.kind}): {sent.id}")
                    return 0
                if hosted_elsewhere:
                    console.print(
                        f"started run {sent.run_id}; follow it with: duragent status {session}"
                    )
                    return 0
                # The run's worker lives in this command: leaving now would stall the run
                # until another worker starts, so stay and show it, as `run` does.
                _announce(f"Started run {sent.run_id}; showing it here (its worker is ours)")
                return await _show_run(client, session, sent, cursor)

    raise typer.Exit(_run(main()))


@app.command()
def guide(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
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
        _fail("give a queued item's id or --text TEXT (one of them)")
    if intent not in (None, *GUIDANCE_INTENTS):
        _fail(f"--intent must be one of {', '.join(GUIDANCE_INTENTS)} (got {intent!r})")
    chosen: GuidanceIntent | None = intent  # type: ignore[assignment]

    async def main() -> None:
        client = await DuragentClient.connect(ctx.obj)
        client.get_session(session)
        if text is None:
            assert item is not None
            try:
                guided = await client.guide(session, item, intent=chosen)
            except QueueItemNotFound as error:
                _fail(f"{error} (new text is sent with: duragent guide SESSION --text TEXT)")
        else:
            guided = await client.guide_text(session, text, intent=chosen)
        console.print(f"guidance sent: {guided.id}")

    _run(main())


GUIDANCE_INTENTS = ("interrupt", "supplement")


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
            _fail("expected `queue SESSION` or `queue rm SESSION ITEM`")
        for item in client.queue_items(args[0]):
            shown, more = _clip(" ".join(item.text.split()), QUEUE_TEXT_CHARS)
            line = Text(f"{item.id}  {item.kind:<9} {shown}")
            if more:
                line.append(f" (+{more:,} characters)", style="dim")
            _say(line)
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
        str | None,
        typer.Option(
            help=f"Active tools, comma-separated (empty: none): {', '.join(default_tool_names())}."
        ),
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
    settings: Settings = ctx.obj
    active_tools = None if tools is None else [t.strip() for t in tools.split(",") if t.strip()]
    # Bad values are refused here, before any service starts.
    _choose("--thinking", thinking, THINKING_LEVELS)
    _choose("--steering-mode", steering_mode, QUEUE_MODES)
    _choose("--follow-up-mode", follow_up_mode, QUEUE_MODES)
    store = _store_client(settings)
    if active_tools is not None:
        try:
            check_tool_names(active_tools, store.tool_names)
        except ValueError as error:
            _fail(f"--tools: {error}")
    fields = {
        "model": model,
        "thinking_level": thinking,
        "active_tools": active_tools,
        "system_prompt": system_prompt,
        "steering_mode": steering_mode,
        "follow_up_mode": follow_up_mode,
    }
    _require_session(store, session)

    async def main() -> None:
        async with local_services(settings, _announce) as ready:
            client = await DuragentClient.connect(ready)
            await client.configure(session, **{k: v for k, v in fields.items() if v is not None})
            console.print(_config_line((await client.status(session)).config))

    _run(main())


def _choose(option: str, value: str | None, allowed: tuple[str, ...]) -> None:
    if value is not None and value not in allowed:
        _fail(f"{option} must be one of {', '.join(allowed)} (got {value!r})")


def _require_session(client: DuragentClient, session: str) -> None:
    """Refuse an unknown session before starting services for it."""
    try:
        client.get_session(session)
    except DuragentError as error:
        _fail(str(error))


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
            console.out(json.dumps(view, indent=2), highlight=False)
            return
        run_line = f" (run {state.run.run_id}, turn {state.run.turn})" if state.run else ""
        console.print(f"[bold]{state.phase}[/]{run_line}")
        console.print(_config_line(state.config))
        if state.run:
            for item in state.run.steering:
                _print_clipped("  steering: ", item.text, QUEUE_TEXT_CHARS)
            for item in state.run.follow_ups:
                _print_clipped("  follow-up: ", item.text, QUEUE_TEXT_CHARS)
            for entry in state.run.pending_writes:
                console.print(f"  pending write: {entry.type}")
        for queued in state.next_turn:
            _print_clipped("  next turn: ", queued.text, QUEUE_TEXT_CHARS)

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
    from client.workers import run_worker

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
    """List sessions, most recently active first.

    A narrow terminal leaves out the least useful columns (workspace, then updated) and
    says so; piped output has every column in full.
    """
    settings: Settings = ctx.obj
    client = _store_client(settings)
    columns = [
        Column("session"),
        Column("name", wrap=True),
        Column("model"),
        Column("updated", drop=2),
        Column("workspace", wrap=True, drop=3),
    ]
    rows = [
        [
            record.id,
            record.name or "",
            record.config.model,
            _when(record.updated_at),
            record.workspace,
        ]
        for record in client.list_sessions()
    ]
    print_table(console, columns, rows)


@app.command()
def show(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    full: Annotated[
        bool, typer.Option("--full", help="Print long messages and tool output whole.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print entries as JSON.")] = False,
) -> None:
    """Show a session: its runs and the transcript of its current branch.

    Long messages and tool output are cut, with a note of how much more there is;
    `--full` prints them whole, `--json` the stored entries.
    """
    settings: Settings = ctx.obj
    client = _store_client(settings)
    try:
        record = client.get_session(session)
    except DuragentError as error:
        _fail(str(error))
    path = client.path(session)
    if as_json:
        console.out(
            json.dumps([e.model_dump(mode="json") for e in path], indent=2), highlight=False
        )
        return
    _say(Text.assemble(("session", "bold"), f" {record.id}  {record.name or ''}"))
    _say(Text(f"workspace {record.workspace}   model {record.config.model}"))
    columns = [
        Column("run"),
        Column("status"),
        Column("turns", justify="right"),
        Column("tokens", justify="right"),
        Column("started", drop=1),
        Column("error", wrap=True),
    ]
    rows = [
        [
            run.run_id,
            run.status,
            str(run.turns),
            str(run.usage.total_tokens),
            _when(run.started_at),
            run.error or "",
        ]
        for run in client.runs(session)
    ]
    print_table(console, columns, rows)
    limits = SHOW_ALL if full else SHOW_LIMITS
    cut = [_print_entry(entry, limits) for entry in path]
    if any(cut):
        _say(
            Text(
                f"Long content was cut: `duragent show {session} --full` prints it whole, "
                "`--json` the stored entries.",
                style="dim",
            )
        )


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
    Lines wrap on a terminal and are whole when piped. Each run links to its page in
    Temporal's web UI when the UI answers (its port: DURAGENT_TEMPORAL_UI_PORT).
    """
    from client.history import render, session_timelines

    settings: Settings = ctx.obj
    store = _store_client(settings)
    _require_session(store, session)
    if run is not None:
        record = store.run_state(run)
        if record is None or record.session_id != session:
            _fail(f"run {run!r} is not a run of session {session} (`duragent show` lists them)")

    async def main() -> int:
        # Checked before a dev server is started here: that one stops when we exit.
        ui_base = await _served_web_ui(settings)
        # The histories live in the dev server's file: start it if it is not running.
        async with ensure_temporal(settings, _announce):
            client = await DuragentClient.connect(settings)
            timelines = await session_timelines(client.temporal, session, run, ui_base=ui_base)
        if as_json:
            dumped = json.dumps([t.model_dump(mode="json") for t in timelines], indent=2)
            console.out(dumped, highlight=False)
        elif timelines:
            render(timelines, console)
        else:
            err.print(f"no workflow history for {f'run {run}' if run else 'this session'}")
        return 0 if timelines else 1

    raise typer.Exit(_run(main()))


async def _served_web_ui(settings: Settings) -> str | None:
    """The Temporal web UI's address when something serves it there now, else None."""
    import httpx

    host = settings.temporal_address.rpartition(":")[0]
    port = settings.web_ui_port
    if not host or port is None:
        return None
    url = f"http://{host}:{port}"
    try:
        async with httpx.AsyncClient(timeout=WEB_UI_PROBE_S) as http:
            await http.get(url)
    except httpx.HTTPError:
        return None
    return url


WEB_UI_PROBE_S = 1.0


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
        _fail(str(error))
    labels = client.labels(session)
    children: dict[str | None, list[SessionEntry]] = {}
    for entry in entries:
        if entry.type != "label":
            children.setdefault(entry.parent_id, []).append(entry)

    def walk(parent: str | None, depth: int) -> None:
        for entry in children.get(parent, []):
            line = Text(f"{'  ' * depth}{entry.id[:12]} {_one_line(entry)}")
            if entry.id in labels:
                line.append(f" [{labels[entry.id]}]", style="green")
            if entry.id == record.leaf_id:
                line.append(" <- leaf", style="bold magenta")
            _say(line)
            walk(entry.id, depth + 1 if len(children.get(entry.id, [])) > 1 else depth)

    walk(None, 0)


def _gist(text: str, limit: int = 70) -> str:
    """The start of `text` on one line (a tree line per entry)."""
    line = " ".join(text[: limit * 4].split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _one_line(entry: SessionEntry) -> str:
    if isinstance(entry, MessageEntry):
        message = entry.message
        if isinstance(message, AssistantMessage):
            calls = ", ".join(c.name for c in message.tool_calls)
            text = text_of(message.content) or (f"calls {calls}" if calls else message.stop_reason)
            return f"assistant: {_gist(text)}"
        if isinstance(message, ToolResultMessage):
            return f"{message.tool_name} result{' (error)' if message.is_error else ''}"
        return f"{message.role}: {_gist(text_of(message.content))}"
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
        _fail(str(error))
    console.print(f"forked: {record.id}")


@app.command()
def label(
    ctx: typer.Context,
    session: Annotated[str, typer.Argument(help="Session id.")],
    entry: Annotated[str, typer.Argument(help="Entry id (or a unique prefix).")],
    text: Annotated[str, typer.Argument(help="The label; empty to clear it.")],
) -> None:
    """Label an entry of the session (shown by `duragent tree`)."""
    entry_id = _entry_id(_store_client(ctx.obj), session, entry)

    async def main() -> None:
        async with local_services(ctx.obj, _announce) as ready:
            client = await DuragentClient.connect(ready)
            await client.set_label(session, entry_id, text or None)
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
    if keep < 0:
        _fail(f"--keep is a number of tokens, 0 or more (got {keep})")
    _require_session(_store_client(ctx.obj), session)

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
    entry_id = _entry_id(_store_client(ctx.obj), session, entry)

    async def main() -> None:
        async with local_services(ctx.obj, _announce) as ready:
            client = await DuragentClient.connect(ready)
            moved = await client.navigate(session, entry_id, summarize=summarize)
            console.print(f"leaf: {moved.leaf_id}")
            if moved.edit_text is not None:
                console.print(Text(f"edit and send again: {moved.edit_text}"))

    _run(main())


def _entry_id(client: DuragentClient, session: str, prefix: str) -> str:
    """The entry `prefix` names (ids are long; `tree` shows their first 12 characters).
    Anything else ends the command with one line: no such session, no such entry, or a
    prefix that names several."""
    try:
        matches = [e.id for e in client.entries(session) if e.id.startswith(prefix)]
    except DuragentError as error:
        _fail(str(error))
    if not prefix or not matches:
        _fail(f"no entry of session {session} has an id starting {prefix!r} (see duragent tree)")
    if len(matches) > 1:
        _fail(f"{len(matches)} entries of session {session} start with {prefix!r}: give more")
    return matches[0]


@dataclass(frozen=True)
class ShowLimits:
    """How much of each part of a transcript `show` prints before cutting it."""

    text: int | None = 2_000
    arguments: int | None = 200
    result: int | None = 300


SHOW_LIMITS = ShowLimits()
SHOW_ALL = ShowLimits(text=None, arguments=None, result=None)
QUEUE_TEXT_CHARS = 200


def _clip(text: str, limit: int | None) -> tuple[str, int]:
    """`text` cut to `limit` characters (None: whole), and how many were left out."""
    if limit is None or len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def _more(left_out: int) -> Text:
    return Text(f" … (+{left_out:,} characters)" if left_out else "", style="dim")


def _say(line: Text) -> None:
    """Print a line of content: wrapped on a terminal, whole when piped (content is
    never split by line breaks of ours where a program reads it)."""
    console.print(line, soft_wrap=not console.is_terminal)


def _print_clipped(label: str, text: str, limit: int) -> None:
    shown, more = _clip(text, limit)
    _say(Text(label) + Text(shown) + _more(more))


def _print_entry(entry: SessionEntry, limits: ShowLimits) -> bool:
    """Print one entry of the transcript; True when some of it was cut.

    Model output is printed as plain `Text`: no markup parsing and no highlighting, whose
    regular expressions take minutes over a long unbroken string. Wrapping stays linear.
    """
    if not isinstance(entry, MessageEntry):
        _say(Text(f"· {entry.type}", style="dim"))
        return False
    message = entry.message
    cut = 0
    if isinstance(message, AssistantMessage):
        text, more = _clip(text_of(message.content), limits.text)
        cut += more
        if text:
            _say(Text("assistant", style="bold cyan") + Text(f" {text}") + _more(more))
        for call in message.tool_calls:
            arguments, more = _clip(json.dumps(call.arguments), limits.arguments)
            cut += more
            line = Text(f"  → {call.name}", style="yellow") + Text(f" {arguments}") + _more(more)
            _say(line)
        if message.error_message:
            _say(Text("model error:", style="red") + Text(f" {message.error_message}"))
    elif isinstance(message, ToolResultMessage):
        mark = Text("✗", style="red") if message.is_error else Text("✓", style="green")
        text, more = _clip(text_of(message.content).strip(), limits.result)
        cut += more
        _say(
            Text("  ")
            + mark
            + Text(f" {message.tool_name} ")
            + Text(text, style="dim")
            + _more(more)
        )
    else:
        text, more = _clip(text_of(message.content), limits.text)
        cut += more
        _say(Text(message.role, style="bold green") + Text(f" {text}") + _more(more))
    return cut > 0


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
