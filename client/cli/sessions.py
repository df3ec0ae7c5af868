"""Commands that read sessions: the list, one session's runs and transcript, its state
now, and what its runs did as their Temporal histories tell it."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.text import Text

from duragent.client.api import DuragentClient
from duragent.client.cli import command
from duragent.client.cli.command import (
    SessionArg,
    client_errors,
    fail,
    missing_store,
    require_session,
    store_client,
)
from duragent.client.cli.views import (
    QUEUE_TEXT_CHARS,
    SHOW_ALL,
    SHOW_LIMITS,
    announce,
    config_line,
    console,
    cost_line,
    err,
    prices_line,
    print_clipped,
    print_entry,
    say,
    when,
)
from duragent.client.services import ensure_temporal
from duragent.client.tables import Column, print_table
from duragent.domain.budgets import budget_lines
from duragent.settings import Settings


def sessions(ctx: typer.Context) -> None:
    """List sessions, most recently active first (none, saying so, where no store is yet).

    A narrow terminal leaves out the least useful columns (workspace, then updated) and
    says so; piped output has every column in full.
    """
    settings: Settings = ctx.obj
    if (missing := missing_store(settings)) is not None:
        err.print(f"No sessions: {missing}", markup=False, highlight=False)
        return
    client = store_client(settings)
    columns = [
        Column("session"),
        Column("name", wrap=True),
        Column("model"),
        Column("updated", drop=2),
        Column("workspace", wrap=True, drop=3),
    ]
    listed = client.sync.sessions.list()
    # The model each session's next turn uses: its current branch's, not its first.
    configs = client.sync.sessions.configs(listed)
    rows = [
        [
            record.id,
            record.name or "",
            config.model,
            when(record.updated_at),
            record.workspace,
        ]
        for record, config in zip(listed, configs, strict=True)
    ]
    print_table(console, columns, rows)


def show(
    ctx: typer.Context,
    session: SessionArg,
    full: Annotated[
        bool, typer.Option("--full", help="Print long messages and tool output whole.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print entries as JSON.")] = False,
) -> None:
    """Show a session: its runs and the transcript of its current branch, with what each
    run, each model call and the whole session cost (and the cache hit rate); its
    sub-agents' sessions, or the parent of a sub-agent.

    Long messages and tool output are cut, with a note of how much more there is;
    `--full` prints them whole, `--json` the stored entries.
    """
    settings: Settings = ctx.obj
    client = store_client(settings)
    with client_errors(settings):
        record = client.sync.sessions.get(session)
    path = client.sync.tree.path(session)
    if as_json:
        console.out(
            json.dumps([e.model_dump(mode="json") for e in path], indent=2), highlight=False
        )
        return
    say(Text.assemble(("session", "bold"), f" {record.id}  {record.name or ''}"))
    host = f"   host {record.host}" if record.host else ""
    (config,) = client.sync.sessions.configs([record])
    say(Text(f"workspace {record.workspace}{host}   model {config.model}"))
    if record.parent_tool_call_id and record.parent_session_id:
        say(
            Text(
                f"sub-agent of session {record.parent_session_id} "
                f"(its call {record.parent_tool_call_id}, run {record.parent_run_id})"
            )
        )
    for child in client.sync.sessions.children(session):
        say(Text(f"sub-agent {child.id}  {child.name or ''}  for call {child.parent_tool_call_id}"))
    costs = client.sync.sessions.costs(session)
    columns = [
        Column("run"),
        Column("status"),
        Column("turns", justify="right"),
        Column("tokens", justify="right"),
        Column("cost", justify="right", wrap=True),
        Column("started", drop=1),
        Column("error", wrap=True),
    ]
    rows = [
        [
            run.run_id,
            run.status,
            str(run.turns),
            str(run.usage.total_tokens),
            costs.of_run(run.run_id).text,
            when(run.started_at),
            run.error or "",
        ]
        for run in client.sync.runs.list(session)
    ]
    print_table(console, columns, rows)
    say(Text(f"session cost {cost_line(costs.session)}; {prices_line(client.prices)}"))
    limits = SHOW_ALL if full else SHOW_LIMITS
    cut = [print_entry(entry, limits, client.prices) for entry in path]
    if any(cut):
        say(
            Text(
                f"Long content was cut: `duragent show {session} --full` prints it whole, "
                "`--json` the stored entries.",
                style="dim",
            )
        )


def history(
    ctx: typer.Context,
    session: SessionArg,
    run: Annotated[str | None, typer.Option("--run", help="Only this run (its run id).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the timelines as JSON.")] = False,
) -> None:
    """What happened in a session's runs, read from their Temporal workflow histories.

    Model calls with usage and cost (today's prices), tool calls with outcome and
    duration, save points, retries, signals and when they were consumed, aborts and
    continue-as-new links, with times; each run's end with what it cost in all.
    Lines wrap on a terminal and are whole when piped. Each run links to its page in
    Temporal's web UI when the UI answers (its port: DURAGENT_TEMPORAL_UI_PORT).
    """
    from duragent.client.history import render, session_timelines
    from duragent.client.history.costs import price_timelines

    settings: Settings = ctx.obj
    store = store_client(settings)
    require_session(store, session)
    if run is not None:
        record = store.sync.runs.get(run)
        if record is None or record.session_id != session:
            fail(f"run {run!r} is not a run of session {session} (`duragent show` lists them)")

    async def main() -> int:
        # Checked before a dev server is started here: that one stops when we exit.
        ui_base = await _served_web_ui(settings)
        # The histories live in the dev server's file: start it if it is not running.
        async with ensure_temporal(settings, announce) as ready:
            client = await DuragentClient.connect(ready)
            timelines = await session_timelines(client.temporal, session, run, ui_base=ui_base)
        price_timelines(timelines, store.prices)
        if as_json:
            dumped = json.dumps([t.model_dump(mode="json") for t in timelines], indent=2)
            console.out(dumped, highlight=False)
        elif timelines:
            render(timelines, console)
        else:
            err.print(
                f"no workflow history for {f'run {run}' if run else 'this session'} in Temporal "
                f"at {client.settings.temporal_address} (namespace "
                f"{client.settings.temporal_namespace}): its runs ran on another Temporal, or "
                "their histories were removed (a dev server keeps them in its database file; "
                "Temporal deletes a closed run's history after its namespace's retention)"
            )
        return 0 if timelines else 1

    raise typer.Exit(command.run(main()))


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


def status(
    ctx: typer.Context,
    session: SessionArg,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Phase, config, queued messages and pending writes of a session, and what its
    latest run and all its runs cost (with the prompt cache's hit rate)."""

    require_session(store_client(ctx.obj), session)

    async def main() -> None:
        client = await DuragentClient.connect(ctx.obj)
        state = await client.sessions.status(session)
        costs = await client.sessions.costs(session)
        latest = state.run.run_id if state.run else _latest_run(client, session)
        run_cost = costs.of_run(latest) if latest else None
        if as_json:
            view = {
                "phase": state.phase,
                "host": state.host,
                "awaiting_host": state.awaiting_host,
                "config": state.config.model_dump(),
                "run": state.run.model_dump(mode="json") if state.run else None,
                "next_turn": [i.model_dump(mode="json") for i in state.next_turn],
                "cost": {
                    "run_id": latest,
                    "run": run_cost.model_dump(mode="json") if run_cost else None,
                    "session": costs.session.model_dump(mode="json"),
                    "prices_as_of": client.prices.as_of.isoformat(),
                    "prices_overridden_by": client.prices.overridden_by,
                },
                "budget": (await client.budgets.get(session)).model_dump(mode="json"),
            }
            console.out(json.dumps(view, indent=2), highlight=False)
            return
        run_line = f" (run {state.run.run_id}, turn {state.run.turn})" if state.run else ""
        console.print(f"[bold]{state.phase}[/]{run_line}")
        if state.awaiting_host:
            say(
                Text(f"waiting for host {state.awaiting_host}: its worker is not taking tool calls")
            )
        if state.host:
            say(Text(f"host {state.host}"))
        console.print(config_line(state.config))
        if latest and run_cost:
            say(Text(f"run {latest} cost {cost_line(run_cost)}"))
        say(Text(f"session cost {cost_line(costs.session)}; {prices_line(client.prices)}"))
        if state.config.budget is not None or (state.run and state.run.budget):
            for line in budget_lines(await client.budgets.get(session)):
                say(Text(line))
        if state.run:
            for item in state.run.steering:
                print_clipped("  steering: ", item.text, QUEUE_TEXT_CHARS)
            for item in state.run.follow_ups:
                print_clipped("  follow-up: ", item.text, QUEUE_TEXT_CHARS)
            for entry in state.run.pending_writes:
                console.print(f"  pending write: {entry.type}")
        for queued in state.next_turn:
            print_clipped("  next turn: ", queued.text, QUEUE_TEXT_CHARS)

    command.run(main())


def _latest_run(client: DuragentClient, session: str) -> str | None:
    """The session's latest run (None before its first)."""
    found = client.sync.runs.list(session)
    return found[0].run_id if found else None
