"""The command that deletes what the store no longer needs: `duragent prune`."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.text import Text

from duragent.client.api import DuragentClient
from duragent.client.cli import command
from duragent.client.cli.command import fail, require_session, store_client
from duragent.client.cli.views import announce, say, when
from duragent.client.retention import LEFTOVER_WORDS, PruneReport, Retention, parse_age
from duragent.client.services import ensure_temporal
from duragent.settings import Settings
from duragent.store.retention import SESSION_TABLES


def prune(
    ctx: typer.Context,
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Sessions idle for longer than AGE (30d, 12h, 90m, 2w): their last "
            "activity, and their sub-agents', is older.",
        ),
    ] = None,
    session: Annotated[
        list[str] | None,
        typer.Option(
            "--session",
            metavar="ID",
            help="This session, whatever its age (repeatable): `prune --session` is how a "
            "session is deleted.",
        ),
    ] = None,
    events_only: Annotated[
        bool,
        typer.Option(
            "--events-only",
            help="With --older-than: only the run events older than AGE, of runs that "
            "ended before then; conversations, runs and costs stay.",
        ),
    ] = False,
    dry_run: Annotated[
        bool,
        typer.Option("--dry-run", help="Print what would be deleted, per table; delete nothing."),
    ] = False,
) -> None:
    """Delete what the store no longer needs, and print what went, per table.

    `--older-than AGE`: every session whose last activity is older than AGE, with
    everything it stored (events, transcript, runs and their cost, queued input) and
    its sub-agents' sessions. `--session ID`: that session, whatever its age. A session
    with a run open (working, or waiting for an approval, an answer or a budget), a
    workflow open in Temporal, a schedule or a trigger is never deleted: `--older-than`
    keeps it and says why, `--session` refuses it. `--events-only` keeps the sessions and
    deletes only their old run events (the bulk of the store). Every prune also deletes
    leftovers nothing reads again (staged messages of runs that ended, old cancel hints
    and trigger deliveries). Deletes go in transactions of at most 1,000 events each;
    workspace folders are left as they are. Nothing runs this by itself: run it as
    often as suits you (docs/SCALING.md, "What grows: retention").
    """
    settings: Settings = ctx.obj
    sessions = list(dict.fromkeys(session or []))
    if older_than is not None and sessions:
        fail("give --older-than AGE or --session ID, not both")
    if older_than is None and not sessions:
        fail(
            "say what to prune: --older-than AGE (e.g. 30d: the sessions idle that long) "
            "or --session ID"
        )
    if events_only and older_than is None:
        fail("--events-only deletes the run events older than --older-than AGE: give it")
    age_ms = 0
    if older_than is not None:
        try:
            age_ms = parse_age(older_than)
        except ValueError as error:
            fail(f"--older-than: {error}")
    store = store_client(settings)
    for named in sessions:
        require_session(store, named)

    async def main() -> PruneReport:
        if events_only:
            return await Retention(store).prune_events(age_ms, dry_run=dry_run)
        # Temporal too: a run no worker has started yet is only there.
        async with ensure_temporal(settings, announce) as ready:
            client = await DuragentClient.connect(ready)
            retention = Retention(client)
            if sessions:
                return await retention.prune_sessions(sessions, dry_run=dry_run)
            return await retention.prune_idle(age_ms, dry_run=dry_run)

    report = command.run(main())
    for line in report_lines(report):
        say(Text(line))
    if sessions and report.kept:
        raise typer.Exit(1)


def report_lines(report: PruneReport) -> list[str]:
    """What a prune deleted (or would), in lines a person reads."""
    verb = "Would delete" if report.dry_run else "Deleted"
    since = f"before {when(report.cutoff_ms)}" if report.cutoff_ms is not None else ""
    lines: list[str] = []
    if report.mode == "events":
        events = report.rows["run_events"]
        lines.append(
            f"{verb} {_count(events, 'run event')} from {since} in "
            f"{_count(report.event_sessions, 'session')}; their conversations, runs and "
            "costs stay."
            if events
            else f"No run event from {since} to delete."
        )
    elif report.sessions:
        sub_agents = report.rows["sessions"] - len(report.sessions)
        which = (
            f"{_count(len(report.sessions), 'session')} last active {since}"
            if report.mode == "idle"
            else f"session{'' if len(report.sessions) == 1 else 's'} " + ", ".join(report.sessions)
        )
        also = f", with {_count(sub_agents, 'sub-agent session')}" if sub_agents > 0 else ""
        lines.append(f"{verb} {which}{also}; rows per table:")
        width = max(len(table) for table in SESSION_TABLES)
        lines += [f"  {table:<{width}}  {report.rows[table]:>12,}" for table in SESSION_TABLES]
    elif report.mode == "idle":
        lines.append(f"No session last active {since} to delete.")
    if report.kept:
        lines.append(f"Kept {_count(len(report.kept), 'session')}:")
        lines += [f"  {kept.session_id}: {kept.reason}" for kept in report.kept]
    leftovers = ", ".join(
        f"{report.leftovers[name]:,} {words}" for name, words in LEFTOVER_WORDS.items()
    )
    lines.append(f"Leftovers: {leftovers}{' would go' if report.dry_run else ' deleted'}.")
    lines.append(
        "Nothing was deleted (--dry-run)."
        if report.dry_run
        else f"Done in {_count(report.transactions, 'transaction')}."
    )
    return lines


def _count(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"
