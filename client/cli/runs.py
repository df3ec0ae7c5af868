"""Commands that start a run and show it to its end, and the one that aborts it."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from duragent.client.api import DuragentClient, RunHandle
from duragent.client.cli import command
from duragent.client.cli.budgets import budget_of, check_limits
from duragent.client.cli.command import SessionArg, fail
from duragent.client.cli.questions import InlineAnswers
from duragent.client.cli.views import announce, console, cost_line
from duragent.client.plugins import load_plugins
from duragent.client.render import EventPrinter
from duragent.client.services import ensure_worker, local_services, stand_in_worker
from duragent.domain.models import UnknownModel, parse_model
from duragent.settings import Settings

EXIT_CODES = {"completed": 0, "error": 1, "aborted": 130}


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
    model: Annotated[
        str | None,
        typer.Option(
            help="Model (provider:model, e.g. openai:gpt-4.1, ollama:qwen3; a bare name is "
            "Claude's) for a new session, or with --session for the session's turns from now on "
            "[env DURAGENT_MODEL]."
        ),
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            help="Host whose workers run a new session's tools (default: the host of the "
            "worker that takes its first run; see `duragent move`)."
        ),
    ] = None,
    max_turns: Annotated[int | None, typer.Option(help="Stop after this many turns.")] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(help="Budget: stop once the run used this many tokens (1 or more)."),
    ] = None,
    max_cost: Annotated[
        float | None,
        typer.Option(help="Budget: stop once the run cost this many US dollars (above 0)."),
    ] = None,
    max_wall: Annotated[
        float | None,
        typer.Option(help="Budget: stop once the run ran this many seconds (above 0)."),
    ] = None,
    budget_ask: Annotated[
        bool,
        typer.Option(help="When a budget limit is reached, wait for a raise instead of stopping."),
    ] = False,
    agent: Annotated[
        str | None,
        typer.Option(
            help="A new session of this agent (a duragent.Agent a plugin brings: its "
            "model, instructions, tools and output); `duragent agents` lists them."
        ),
    ] = None,
    plugin: command.PluginOption = None,
) -> None:
    """Run PROMPT in a session and stream what happens; exit with the run's outcome
    (0 completed, 1 error, 130 aborted). A run of an agent with an output type ends
    with its output, as JSON, on the last line of standard output.

    Starts a Temporal dev server and a worker in this process when none is reachable, and
    for that worker the offline model when the model's provider has no key or address of
    its own (ANTHROPIC_API_KEY for Claude, OPENAI_API_KEY or OPENAI_BASE_URL for openai:).
    A worker already polling is named and used; when it does not answer for a few seconds,
    a worker is started here after all. Ctrl-C or SIGTERM stop what it started; the run
    stays open for the next worker.
    """
    settings = command.with_plugins(ctx.obj, plugin)
    if agent is not None:
        if session is not None:
            fail("--agent starts a new session of the agent: leave out --session")
        with command.client_errors():
            load_plugins(settings).agent(agent)  # AgentNotFound lists the agents there are
    if model is not None:
        try:
            parse_model(model)
        except UnknownModel as error:
            fail(f"--model: {error}")
        if session is None:
            settings = settings.model_copy(update={"model": model})
    if max_turns is not None and max_turns < 1:
        fail(f"--max-turns is at least 1 (got {max_turns})")
    limits = (max_tokens, max_cost, max_wall)
    given = {"--max-tokens": max_tokens, "--max-cost": max_cost, "--max-wall": max_wall}
    check_limits(given, "for no {kind} limit, leave {option} out")
    on = "ask" if budget_ask else "stop"
    budget = budget_of(None, *limits, on) if any(v is not None for v in limits) else None

    async def open_session(client: DuragentClient) -> str:
        if session is None:
            record = await client.sessions.create(
                workspace=workspace, name=name, host=host, agent=agent, model=model
            )
            announce(f"Session {record.id} (workspace {record.workspace})")
            return record.id
        return (await client.sessions.get(session)).id

    async def start(client: DuragentClient, session_id: str) -> RunHandle:
        if model is not None and session is not None:
            await client.config.update(session_id, model=model)
        return await client.runs.prompt(session_id, prompt, max_turns=max_turns, budget=budget)

    raise typer.Exit(command.run(_follow(settings, open_session, start)))


def skill(
    ctx: typer.Context,
    session: SessionArg,
    name: Annotated[str, typer.Argument(help="Skill name (.duragent/skills/NAME.md).")],
    args: Annotated[list[str] | None, typer.Argument(help="Text passed after the skill.")] = None,
) -> None:
    """Run a skill in a session and stream what happens."""

    async def start(client: DuragentClient, session_id: str) -> RunHandle:
        return await client.runs.skill(session_id, name, args or [])

    raise typer.Exit(command.run(_follow(ctx.obj, _existing(session), start)))


def template(
    ctx: typer.Context,
    session: SessionArg,
    name: Annotated[str, typer.Argument(help="Template name (.duragent/prompts/NAME.md).")],
    args: Annotated[
        list[str] | None, typer.Argument(help="Positional arguments ($1, $2, $@).")
    ] = None,
) -> None:
    """Run a prompt template with arguments in a session and stream what happens."""

    async def start(client: DuragentClient, session_id: str) -> RunHandle:
        return await client.runs.prompt_from_template(session_id, name, args or [])

    raise typer.Exit(command.run(_follow(ctx.obj, _existing(session), start)))


def abort(ctx: typer.Context, session: SessionArg) -> None:
    """Abort the running agent: running tools are killed, finished results kept."""
    settings: Settings = ctx.obj

    async def main() -> int:
        async with local_services(settings, announce) as ready:
            client = await DuragentClient.connect(ready)
            result = await client.runs.abort(session)
            console.print(f"run {result.run_id} aborted after {result.turns} turn(s)")
            for text in [*result.cleared_steering, *result.cleared_follow_ups]:
                console.print(f"  dropped: {escape(text)}")
            return 0

    raise typer.Exit(command.run(main()))


def _existing(session: str) -> Callable[[DuragentClient], Awaitable[str]]:
    """Open `session` (it must exist) for `_follow`."""

    async def existing(client: DuragentClient) -> str:
        return (await client.sessions.get(session)).id

    return existing


async def _follow(
    settings: Settings,
    open_session: Callable[[DuragentClient], Awaitable[str]],
    start: Callable[[DuragentClient, str], Awaitable[RunHandle]],
) -> int:
    """Start a run (services started as needed), print its events, return its exit code.

    On a worker elsewhere, the run is watched: when that worker does not answer (it may
    have been killed, which Temporal learns only a minute later), one is started here."""
    async with (
        local_services(settings, announce, worker=False) as ready,
        ensure_worker(ready, announce) as elsewhere,
    ):
        client = await DuragentClient.connect(ready)
        session_id = await open_session(client)
        # Read before the start: no event of the run is missed.
        cursor = await client.events.cursor(session_id)
        handle = await start(client, session_id)
        async with stand_in_worker(ready, announce, handle.workflow.id, elsewhere):
            return await show_run(client, session_id, handle, cursor)


async def show_run(client: DuragentClient, session_id: str, handle: RunHandle, cursor: int) -> int:
    """Print a run's events from `cursor` until it ends (the last line with what the run
    cost, as `status` says it); its exit code."""

    def run_cost(run_id: str) -> str:
        return cost_line(client.sync.sessions.costs(session_id).of_run(run_id))

    printer = EventPrinter(console, session_id, run_cost)
    # On a terminal, the run's `ask_user` questions are answered right here.
    inline = InlineAnswers(client, session_id, sys.stdin) if sys.stdin.isatty() else None
    try:
        async for event in client.events.stream(session_id, run_id=handle.run_id, after=cursor):
            printer.show(event)
            if inline is not None:
                inline.on_event(event)
    except asyncio.CancelledError:  # a signal: services stop, the run stays open
        printer.close()
        announce(
            f"Stopped. Run {handle.run_id} stays open and goes on with the next worker "
            f"(duragent worker); end it with: duragent abort {session_id}"
        )
        raise
    finally:
        printer.close()  # also on an error: the terminal gets its cursor back
        if inline is not None:
            inline.close()
    result = await handle.result()
    if result.output is not None:  # an agent's structured output: for the next program
        print(json.dumps(result.output, ensure_ascii=False), flush=True)
    announce(f"Inspect it: duragent show {session_id}")
    return EXIT_CODES[result.status]
