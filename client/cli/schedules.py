"""`duragent schedule`: prompts sent to a session on a timetable (Temporal Schedules).

A schedule fires on Temporal's side: its firings need Temporal and a worker running
(`duragent worker`), not this command."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Annotated, Any

import typer
from rich.text import Text

from duragent.client.api import DuragentClient
from duragent.client.cli import command
from duragent.client.cli.command import SessionArg, require_session, store_client
from duragent.client.cli.views import announce, console, say
from duragent.client.services import ensure_temporal
from duragent.domain.schedules import BUSY_POLICIES, ScheduleView
from duragent.settings import Settings

schedule_app = typer.Typer(
    help="Prompts sent to a session on a timetable: add, list, pause, resume, trigger, delete.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)

ScheduleArg = Annotated[str, typer.Argument(help="Schedule id (`duragent schedule list`).")]
NoteOption = Annotated[str, typer.Option("--note", help="Why (shown in the list).")]


@contextlib.asynccontextmanager
async def _client(settings: Settings) -> AsyncIterator[DuragentClient]:
    async with ensure_temporal(settings, announce) as ready:
        yield await DuragentClient.connect(ready)


def _run(settings: Settings, act: Callable[[DuragentClient], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with _client(settings) as client:
            return await act(client)

    return command.run(main())


@schedule_app.command("add")
def add(
    ctx: typer.Context,
    session: SessionArg,
    prompt: Annotated[str, typer.Argument(help="The prompt each firing sends.")],
    cron: Annotated[
        list[str] | None,
        typer.Option(
            "--cron",
            metavar="EXPR",
            help="A cron expression (`0 9 * * 1-5`: weekdays at 9:00); repeatable.",
        ),
    ] = None,
    every: Annotated[
        str | None,
        typer.Option(
            "--every",
            metavar="INTERVAL",
            help="An interval: a whole number with a unit, d h m s, largest first: "
            "`1h`, `30m`, `90s`, `1h30m` (at least 1s, at most 366d).",
        ),
    ] = None,
    timezone: Annotated[
        str | None,
        typer.Option("--timezone", metavar="TZ", help="IANA time zone of --cron (default UTC)."),
    ] = None,
    busy: Annotated[
        str,
        typer.Option(
            "--busy",
            help="When the session is busy at the time: `queue` the prompt as a follow-up "
            "of the open run, `skip` this firing, or run it in a `new_session` made from "
            "this one.",
        ),
    ] = "queue",
    new_session: Annotated[
        bool,
        typer.Option(
            "--new-session",
            help="Every firing runs in a new session made from SESSION (its config and "
            "workspace): SESSION is a template.",
        ),
    ] = False,
    paused: Annotated[bool, typer.Option("--paused", help="Make it paused.")] = False,
) -> None:
    """Send PROMPT to SESSION on a timetable (`--cron` or `--every`). Each run it starts,
    and each follow-up it queues, is marked as scheduled (`duragent history`, the page).
    A firing missed while Temporal was down runs late within the catch-up window
    (DURAGENT_SCHEDULE_CATCHUP_WINDOW); firings need a worker running."""
    settings: Settings = ctx.obj
    require_session(store_client(settings), session)
    if busy not in BUSY_POLICIES:
        command.fail(f"--busy {busy!r}: expected one of {', '.join(BUSY_POLICIES)}")

    async def act(client: DuragentClient) -> ScheduleView:
        return await client.schedules.add(
            session,
            prompt,
            cron=cron or [],
            every=every,
            timezone=timezone,
            busy=busy,
            new_session=new_session,
            paused=paused,
        )

    made: ScheduleView = _run(settings, act)
    say(Text(f"schedule {made.id} made"))
    _print(made)


@schedule_app.command("list")
def list_schedules(
    ctx: typer.Context,
    session: Annotated[
        str | None, typer.Argument(help="Only this session's (default: all of no owner).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print them as JSON.")] = False,
) -> None:
    """The schedules: their timetable, busy policy, whether paused, next and recent
    firings."""
    settings: Settings = ctx.obj
    if session is not None:
        require_session(store_client(settings), session)

    async def act(client: DuragentClient) -> list[ScheduleView]:
        views = await client.schedules.list(session_id=session)
        for view in views:  # what the last firing did
            if view.recent:
                view.recent[-1].outcome = await client.schedules.outcome(
                    view.recent[-1].workflow_id
                )
        return views

    views: list[ScheduleView] = _run(settings, act)
    if as_json:
        console.out(json.dumps([v.model_dump(mode="json") for v in views], indent=2))
        return
    if not views:
        say(Text("no schedules"))
    for view in views:
        _print(view)


@schedule_app.command("pause")
def pause(ctx: typer.Context, schedule: ScheduleArg, note: NoteOption = "") -> None:
    """Stop firing until resumed."""
    _print(_run(ctx.obj, lambda c: c.schedules.pause(schedule, note)))


@schedule_app.command("resume")
def resume(ctx: typer.Context, schedule: ScheduleArg, note: NoteOption = "") -> None:
    """Fire again from the next time on the timetable (times missed meanwhile stay
    missed)."""
    _print(_run(ctx.obj, lambda c: c.schedules.resume(schedule, note)))


@schedule_app.command("trigger")
def trigger(ctx: typer.Context, schedule: ScheduleArg) -> None:
    """Fire now, once, paused or not (the busy policy applies)."""
    _print(_run(ctx.obj, lambda c: c.schedules.trigger(schedule)))


@schedule_app.command("delete")
def delete(ctx: typer.Context, schedule: ScheduleArg) -> None:
    """Delete the schedule: it fires no more (a firing being delivered goes on)."""
    _run(ctx.obj, lambda c: c.schedules.delete(schedule))
    say(Text(f"schedule {schedule} deleted"))


def _print(view: ScheduleView) -> None:
    when = f"every {view.every}" if view.every else "cron " + " | ".join(view.cron)
    if view.timezone:
        when += f" ({view.timezone})"
    state = "paused" if view.paused else "active"
    target = f"new session from {view.session_id}" if view.new_session else view.session_id
    line = Text(f"{view.id}  {state}  {when}  session {target}  busy: {view.busy}")
    if view.note:
        line.append(f"  note: {view.note}")
    say(line)
    say(Text(f"  prompt: {' '.join(view.prompt.split())[:100]}"))
    if view.next_runs and not view.paused:
        say(Text(f"  next: {view.next_runs[0]:%Y-%m-%d %H:%M:%S} UTC"))
    if view.recent:
        last, count = view.recent[-1], len(view.recent)
        did = ""
        if last.outcome is not None:
            did = f": {last.outcome.outcome} in session {last.outcome.session_id}"
            did += f" ({last.outcome.detail})" if last.outcome.detail else ""
        say(Text(f"  last fired: {last.scheduled_at:%Y-%m-%d %H:%M:%S} UTC{did} ({count} recent)"))
