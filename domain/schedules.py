"""Schedules: a prompt sent to a session on a timetable (Temporal Schedules underneath).

What a schedule's firing carries, what it did, and how `--every` reads. A schedule's
action is the small `ScheduledPrompt` workflow, whose one activity delivers the prompt
the way a person's prompt is delivered (`client.schedules`).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

BusyPolicy = Literal["queue", "skip", "new_session"]
"""What a firing does when the session is busy (a run, or a compaction, a move...):
`queue` sends the prompt to the open run as a follow-up (it runs when the agent would
otherwise stop; a session busy with something that is not a run is tried again until it
is idle or the firing's delivery time is up); `skip` delivers nothing this time;
`new_session` runs the prompt in a new session made from this one (its config and
workspace)."""
BUSY_POLICIES: tuple[BusyPolicy, ...] = ("queue", "skip", "new_session")

DELIVER_SCHEDULED_PROMPT = "deliver_scheduled_prompt"
SCHEDULE_ID_PREFIX = "duragent-schedule-"
MIN_EVERY = timedelta(seconds=1)
MAX_EVERY = timedelta(days=366)

_EVERY_PART = re.compile(r"(\d+)([dhms])")
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


def parse_every(text: str) -> timedelta:
    """`--every`: whole numbers each with a unit, largest first, no spaces: `90s`, `30m`,
    `1h`, `1h30m`, `2d`. Raises `ValueError` naming what is wrong; at least a second,
    at most 366 days."""
    spec = text.strip().lower()
    parts = _EVERY_PART.findall(spec)
    units = [unit for _, unit in parts]
    if not parts or "".join(f"{n}{u}" for n, u in parts) != spec:
        raise ValueError(
            f"--every {text!r}: expected a number with a unit (d, h, m, s), e.g. 1h, 30m, "
            "90s or 1h30m"
        )
    if len(set(units)) != len(units) or units != sorted(units, key=list("dhms").index):
        raise ValueError(f"--every {text!r}: each unit once, largest first (e.g. 1h30m)")
    every = timedelta(seconds=sum(int(n) * _UNIT_SECONDS[u] for n, u in parts))
    if not MIN_EVERY <= every <= MAX_EVERY:
        raise ValueError(f"--every {text!r}: must be between 1s and 366d")
    return every


def every_text(every: timedelta) -> str:
    """An interval as `parse_every` reads it: `1h30m`, `90s` stays `1m30s`."""
    seconds, parts = int(every.total_seconds()), []
    for unit, size in _UNIT_SECONDS.items():
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


class ScheduleFiring(BaseModel):
    """The schedule's action argument: what each firing delivers, and where."""

    model_config = ConfigDict(extra="forbid")

    schedule_id: str
    session_id: str
    """The session the prompt goes to; with `new_session`, the one each new session is
    made from (its config and workspace)."""
    prompt: str
    busy: BusyPolicy = "queue"
    new_session: bool = False
    """Every firing runs in a new session made from `session_id` (a template)."""
    owner: str | None = None
    """The user the schedule (and the sessions it makes) belong to."""


class DeliverScheduledPrompt(BaseModel):
    """The delivering activity's input: the firing, with its id and time."""

    model_config = ConfigDict(extra="forbid")

    firing: ScheduleFiring
    firing_id: str
    """Unique per firing (its workflow id): delivering it twice delivers it once."""
    scheduled_at: int
    """The time the schedule fired for (ms since the epoch)."""


FiringOutcomeKind = Literal["started", "queued", "skipped"]


class FiringOutcome(BaseModel):
    """What one firing did: started a run (in the session, or in a new one), queued the
    prompt as a follow-up of the open run, or skipped it (the session was busy)."""

    model_config = ConfigDict(extra="forbid")

    outcome: FiringOutcomeKind
    session_id: str
    run_id: str | None = None
    detail: str = ""


class RecentFiring(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scheduled_at: datetime
    started_at: datetime
    workflow_id: str
    outcome: FiringOutcome | None = None
    """What it did, when asked for (`get(..., outcomes=True)`) and it is done."""


class ScheduleView(BaseModel):
    """A schedule as `schedule list` and the API show it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    session_id: str
    owner: str | None
    prompt: str
    busy: BusyPolicy
    new_session: bool
    cron: list[str] = Field(default_factory=list)
    every: str | None = None
    """The interval (`parse_every`'s form), for a schedule made with `--every`."""
    timezone: str | None = None
    paused: bool
    note: str = ""
    """Why it was paused or resumed, as given."""
    catchup_window_s: float
    next_runs: list[datetime] = Field(default_factory=list)
    recent: list[RecentFiring] = Field(default_factory=list)
    """The latest firings, oldest first (Temporal keeps a few)."""
    created_at: int
