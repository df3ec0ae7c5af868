"""Schedules: a prompt sent to a session on a timetable (Temporal Schedules underneath).

What a schedule's firing carries, what it did, and how `--every` reads. A schedule's
action is the small `ScheduledPrompt` workflow, whose one activity delivers the prompt
the way a person's prompt is delivered (`client.schedules`).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Literal, NamedTuple

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


CRON_FORMS = (
    "a cron expression has 5 fields: minute hour day-of-month month day-of-week, e.g. "
    "'0 * * * *' (every hour) or '0 9 * * 1-5' (9:00 on weekdays); for an interval give "
    "every: 1h, 30m or 90s"
)
"""What a cron expression is, said with every refusal of one."""

CRON_SHORTHANDS = ("@hourly", "@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually")


class _CronField(NamedTuple):
    name: str
    low: int
    high: int
    names: tuple[str, ...] = ()
    """Names a value may be given by (a prefix of at least `prefix` letters)."""
    prefix: int = 0
    called: str = ""
    """How the refusal says the names."""


_MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip
_DAYS = ("sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday")
_SECOND = _CronField("second", 0, 59)
_MINUTE = _CronField("minute", 0, 59)
_HOUR = _CronField("hour", 0, 23)
_DAY_OF_MONTH = _CronField("day-of-month", 1, 31)
_MONTH = _CronField("month", 1, 12, _MONTHS, 3, "a month's name (jan, feb, ...)")
_DAY_OF_WEEK = _CronField("day-of-week", 0, 7, _DAYS, 2, "a day's name (mon, tue, ...)")
_YEAR = _CronField("year", 2000, 2100)
_CRON_LAYOUTS = {
    5: (_MINUTE, _HOUR, _DAY_OF_MONTH, _MONTH, _DAY_OF_WEEK),
    6: (_MINUTE, _HOUR, _DAY_OF_MONTH, _MONTH, _DAY_OF_WEEK, _YEAR),
    7: (_SECOND, _MINUTE, _HOUR, _DAY_OF_MONTH, _MONTH, _DAY_OF_WEEK, _YEAR),
}
_GO_DURATION = re.compile(r"(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+")


def check_cron(expression: str) -> None:
    """Refuses (`ValueError`, in plain words, naming the field) a cron expression the
    schedule's server would refuse, so a person reads what is accepted rather than the
    server's words. Read as Temporal reads one: 5 fields (minute hour day-of-month month
    day-of-week), 6 (and a year) or 7 (a second first); each field `*`, a value, a range
    `a-b`, a list `a,b`, each with an optional step `/n`; a month or a day by its name;
    `@hourly`, `@daily`, ... and `@every <interval>`; a `# comment` and a `CRON_TZ=` prefix.
    The page checks the same as it is typed (api/web/js/schedules.js)."""
    text = expression.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        text = text.partition(" ")[2]
    text = text.partition("#")[0].strip()
    if text.startswith("@every"):
        interval, _, phase = text.removeprefix("@every").strip().partition("/")
        if not all(
            _GO_DURATION.fullmatch(part) for part in ([interval, phase] if phase else [interval])
        ):
            raise ValueError(
                f"cron {expression!r}: @every needs an interval after it, e.g. @every 1h30m"
            )
        return
    if text.startswith("@"):
        if text not in CRON_SHORTHANDS:
            raise ValueError(
                f"cron {expression!r}: the shorthands are {', '.join(CRON_SHORTHANDS)} and "
                "@every followed by an interval (@every 1h30m)"
            )
        return
    fields = text.split()
    layout = _CRON_LAYOUTS.get(len(fields))
    if layout is None:
        count = f"{len(fields)} field{'' if len(fields) == 1 else 's'}"
        raise ValueError(f"cron {expression!r} has {count}; {CRON_FORMS}")
    for field, value in zip(layout, fields, strict=True):
        if not _cron_field_ok(field, value):
            named = f" or {field.called}" if field.called else ""
            raise ValueError(
                f"cron {expression!r}: the {field.name} field {value!r} is not from "
                f"{field.low} to {field.high}{named}; a field is *, a value, a range (1-5), a list "
                "(1,15) or any of these with a step (*/15)"
            )


def _cron_field_ok(field: _CronField, text: str) -> bool:
    for part in text.split(","):
        base, slash, step = part.partition("/")
        if slash and not (step.isdigit() and int(step) >= 1):
            return False
        if base == "*":
            continue
        low, dash, high = base.partition("-")
        first = _cron_value(field, low)
        if first is None:
            return False
        if dash and ((last := _cron_value(field, high)) is None or last < first):
            return False
    return True


def _cron_value(field: _CronField, text: str) -> int | None:
    if field.names and len(text) >= field.prefix and text.isalpha():
        found = [i for i, name in enumerate(field.names) if name.startswith(text.lower())]
        return found[0] + (1 if field is _MONTH else 0) if found else None
    if not text.isdigit():
        return None
    value = int(text)
    return value if field.low <= value <= field.high else None


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
