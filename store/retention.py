"""Retention: what `duragent prune` deletes (docs/SCALING.md, "What grows: retention").

Nothing here runs by itself: the store keeps everything until someone prunes. Three jobs,
each in bounded transactions, so a prune of millions of rows never holds a lock for long
(on SQLite a writer holds the whole file; on PostgreSQL a long transaction holds back
vacuum):

- Whole sessions (`stale_roots`, `unit_of`, `drop_unit`): a session with everything it
  stored, in every table, and its sub-agents' sessions with it (a unit: the parent's
  transcript names their calls, its cost counts theirs, `duragent show` lists them), never
  a sub-agent's session alone. A unit that has a run open, a schedule or a trigger is
  kept (`held`). Its run events, the bulk of its rows, go first, `batch` at a time, each
  batch in a transaction that locks the unit's session rows and checks again; then the
  rest (its conversation, runs, queue, staged messages and the sessions' rows) in one
  transaction that checks once more, so a session is never left half there: a run that
  starts meanwhile either comes first (the unit is kept, with at most its old events
  gone, as `--events-only` leaves a session) or finds no session (and fails, saying so).
- Events only (`drop_old_events`): run events older than the cutoff, of runs that ended
  before it (and events of no run), from every session; the conversations, runs, queues
  and costs stay whole.
- Leftovers (`drop_leftovers`): rows nothing reads again, whatever their session: staged
  messages of runs that ended, cancel hints past their minute, trigger deliveries past
  the time they are remembered for.

Usage and cost are read from the runs' states and the display messages (`store.spend`),
never from run events, so dropping events changes no figure; a pruned session's cost goes
with it (there is no total across sessions to keep).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    FromClause,
    Select,
    Table,
    delete,
    exists,
    func,
    or_,
    select,
    tuple_,
    update,
)
from sqlalchemy.orm import aliased

from duragent.domain.trigger_signatures import DELIVERY_MEMORY_S
from duragent.store.db import Database
from duragent.store.statements import Tx, dialect_of, execute
from duragent.store.tables import (
    CancelHintRow,
    DisplayMessageRow,
    EntryRow,
    InputQueueRow,
    RunEventRow,
    RunStateRow,
    ScheduleRow,
    SessionRow,
    StagedMessageRow,
    TriggerDeliveryRow,
    TriggerRow,
    table_of,
)

BATCH_ROWS = 1000
"""Rows deleted per transaction (run events, and each kind of leftover)."""
MAX_UNIT_SESSIONS = 10_000
"""A session's sub-agent sessions looked at, at most: a unit past it is kept (no run
makes that many)."""
CANCEL_HINT_KEEP_MS = 60_000
"""A cancel hint is read within moments of being written; past a minute it is never read."""

_sessions = table_of(SessionRow)
_runs = table_of(RunStateRow)
_events = table_of(RunEventRow)
_display = table_of(DisplayMessageRow)
_entries = table_of(EntryRow)
_queue = table_of(InputQueueRow)
_staged = table_of(StagedMessageRow)
_schedules = table_of(ScheduleRow)
_triggers = table_of(TriggerRow)
_hints = table_of(CancelHintRow)
_deliveries = table_of(TriggerDeliveryRow)
_EVENTS = _events.alias("picked")
"""The events a delete picks, in its subquery (the delete's own table is `_events`)."""

SESSION_TABLES = (
    "run_events",
    "display_messages",
    "session_entries",
    "run_states",
    "input_queue",
    "staged_messages",
    "sessions",
)
"""Every table holding a session's rows, in the order a report lists them (schedules and
triggers hold none of a pruned session: a session they name is kept)."""
_BY_SESSION = {
    "display_messages": _display.c.session_id,
    "session_entries": _entries.c.session_id,
    "run_states": _runs.c.session_id,
    "input_queue": _queue.c.session_id,
    "staged_messages": _staged.c.session_id,
    "run_events": _events.c.session_id,
}


@dataclass
class Tally:
    """What a job deleted (or, in a dry run, would delete): rows per table, and the
    transactions it took."""

    rows: Counter[str] = field(default_factory=Counter)
    transactions: int = 0

    def add(self, other: Tally) -> None:
        self.rows.update(other.rows)
        self.transactions += other.transactions


# ---------------------------------------------------------------------- whole sessions


def stale_roots(
    db: Tx, cutoff_ms: int, after: tuple[int, str] | None, limit: int
) -> list[tuple[int, str]]:
    """Sessions changed last before `cutoff_ms` that head a unit (no sub-agent's session,
    unless its parent is gone), as (updated_at, id), in that order after `after`: a page
    of the candidates, read through the index on `updated_at`. Each is only a candidate:
    `last_activity` and `held` decide."""
    parent = aliased(_sessions)
    query = select(_sessions.c.updated_at, _sessions.c.id).where(
        _sessions.c.updated_at < cutoff_ms,
        or_(
            _sessions.c.parent_tool_call_id.is_(None),
            ~exists().where(parent.c.id == _sessions.c.parent_session_id),
        ),
    )
    if after is not None:
        query = query.where(tuple_(_sessions.c.updated_at, _sessions.c.id) > tuple_(*after))
    query = query.order_by(_sessions.c.updated_at, _sessions.c.id).limit(limit)
    return [(int(row.updated_at), str(row.id)) for row in execute(db, query)]


def unit_of(db: Tx, session_id: str) -> list[str]:
    """The session and its sub-agents' sessions, theirs too, at any depth (forks are
    sessions of their own); the session first. At most `MAX_UNIT_SESSIONS` + 1."""
    unit, todo, seen = [session_id], [session_id], {session_id}
    while todo and len(unit) <= MAX_UNIT_SESSIONS:
        rows = execute(
            db,
            select(_sessions.c.id).where(
                _sessions.c.parent_session_id.in_(todo),
                _sessions.c.parent_tool_call_id.is_not(None),
            ),
        )
        todo = [row.id for row in rows if row.id not in seen]
        seen.update(todo)
        unit += todo
    return unit


def is_stored(db: Tx, session_id: str) -> bool:
    """Whether the store holds the session."""
    return (
        execute(db, select(_sessions.c.id).where(_sessions.c.id == session_id)).first() is not None
    )


def sub_agent_of(db: Tx, session_id: str) -> tuple[str, str] | None:
    """(the parent session, its call) when the session is a sub-agent's whose parent is
    still stored: such a session goes only with its parent."""
    parent = aliased(_sessions)
    row = execute(
        db,
        select(_sessions.c.parent_session_id, _sessions.c.parent_tool_call_id)
        .join(parent, parent.c.id == _sessions.c.parent_session_id)
        .where(_sessions.c.id == session_id, _sessions.c.parent_tool_call_id.is_not(None)),
    ).first()
    return (str(row.parent_session_id), str(row.parent_tool_call_id)) if row else None


def held(db: Tx, unit: Sequence[str]) -> str | None:
    """Why the unit must stay whatever its age, or None: a run open (running, or waiting
    on a person: an approval, a question, a budget), a schedule or a trigger that sends
    it prompts. Runs record themselves in the store before they do anything; a run
    Temporal started that no worker has begun yet is not here (the caller asks Temporal)."""
    if len(unit) > MAX_UNIT_SESSIONS:
        return f"it has more than {MAX_UNIT_SESSIONS} sub-agent sessions"
    run = execute(
        db,
        select(_runs.c.session_id, _runs.c.run_id, _runs.c.phase)
        .where(_runs.c.session_id.in_(unit), _runs.c.status == "running")
        .limit(1),
    ).first()
    if run is not None:
        whose = "" if run.session_id == unit[0] else f" in its sub-agent session {run.session_id}"
        phase = str(run.phase).replace("_", " ")
        return f"a run is open{whose} (run {run.run_id}, {phase}): `duragent abort` it first"
    schedule = execute(
        db, select(_schedules.c.id).where(_schedules.c.session_id.in_(unit)).limit(1)
    ).first()
    if schedule is not None:
        return (
            f"schedule {schedule.id} sends it prompts: "
            f"`duragent schedule delete {schedule.id}` first"
        )
    trigger = execute(
        db, select(_triggers.c.id).where(_triggers.c.session_id.in_(unit)).limit(1)
    ).first()
    if trigger is not None:
        return (
            f"trigger {trigger.id} sends it prompts: `duragent trigger delete {trigger.id}` first"
        )
    return None


def last_activity(db: Tx, unit: Sequence[str]) -> int:
    """When anything of the unit last changed (milliseconds): a session's row (its leaf,
    config, name), a run's state, its input queue, its newest event or display message."""
    newest = [
        select(func.max(_sessions.c.updated_at)).where(_sessions.c.id.in_(unit)),
        select(func.max(_runs.c.updated_at)).where(_runs.c.session_id.in_(unit)),
        select(func.max(_queue.c.updated_at)).where(_queue.c.session_id.in_(unit)),
    ]
    found = [db_scalar(db, query) for query in newest]
    for session_id in unit:  # each session's newest rows, read off the end of its key
        for table in (_events, _display):
            last = (
                select(table.c.created_at)
                .where(table.c.session_id == session_id)
                .order_by(table.c.seq.desc())
                .limit(1)
            )
            found.append(db_scalar(db, last))
    return max((value for value in found if value is not None), default=0)


def db_scalar(db: Tx, query: Select[Any]) -> int | None:
    """The query's one value as an int (None for none)."""
    value = execute(db, query).scalar()
    return None if value is None else int(value)


def unit_rows(db: Tx, unit: Sequence[str]) -> Counter[str]:
    """The rows the unit holds, per table: what `drop_unit` would delete."""
    rows: Counter[str] = Counter()
    for table, column in _BY_SESSION.items():
        rows[table] = db_scalar(db, select(func.count()).where(column.in_(unit))) or 0
    rows["sessions"] = len(unit)
    return rows


def drop_unit(
    database: Database, unit: Sequence[str], cutoff_ms: int | None, batch: int = BATCH_ROWS
) -> tuple[Tally, str | None]:
    """Delete the unit (see the module): its run events `batch` at a time, then the rest
    in one transaction, each transaction checking under the sessions' row locks that the
    unit is not `held` and, with `cutoff_ms`, still idle since then. Returns what was
    deleted and, when a check failed partway, why the unit stayed."""
    tally = Tally()
    for session_id in unit:
        while True:
            with database.statements() as db:
                reason = _still_prunable(db, unit, cutoff_ms)
                if reason is not None:
                    return tally, reason
                oldest = (
                    select(_EVENTS.c.seq)
                    .where(_EVENTS.c.session_id == session_id)
                    .order_by(_EVENTS.c.seq)
                    .limit(batch)
                )
                deleted = _delete_events(db, session_id, oldest)
            tally.transactions += 1
            tally.rows["run_events"] += deleted
            if deleted < batch:
                break
    with database.statements() as db:
        reason = _still_prunable(db, unit, cutoff_ms)
        if reason is not None:
            return tally, reason
        for table, column in _BY_SESSION.items():
            tally.rows[table] += execute(db, delete(column.table).where(column.in_(unit))).rowcount
        tally.rows["sessions"] += execute(
            db, delete(_sessions).where(_sessions.c.id.in_(unit))
        ).rowcount
    tally.transactions += 1
    return tally, None


def _still_prunable(db: Connection, unit: Sequence[str], cutoff_ms: int | None) -> str | None:
    """Lock the unit's session rows until this transaction ends and check it again: a
    run's start, and every write that numbers events or messages, takes the same lock."""
    found = _lock_sessions(db, unit)
    if unit[0] not in found:
        return "it was deleted meanwhile"
    reason = held(db, unit)
    if reason is None and cutoff_ms is not None and last_activity(db, unit) >= cutoff_ms:
        reason = "it was active again while being pruned"
    return reason


def _lock_sessions(db: Connection, unit: Sequence[str]) -> set[str]:
    """Lock the sessions' rows (in id order, so two prunes never wait on each other in
    a circle); the ids still stored. On PostgreSQL `FOR UPDATE`, which a run's start also
    waits for (its run row's foreign key takes a share lock of the session's row); SQLite
    has one writer at a time, and this write makes the transaction it from the start."""
    ids = sorted(unit)
    if dialect_of(db) == "postgresql":
        rows = execute(
            db,
            select(_sessions.c.id)
            .where(_sessions.c.id.in_(ids))
            .order_by(_sessions.c.id)
            .with_for_update(),
        )
        return {str(row.id) for row in rows}
    execute(
        db,
        update(_sessions)
        .where(_sessions.c.id.in_(ids))
        .values(last_event_seq=_sessions.c.last_event_seq),
    )
    return {
        str(row.id) for row in execute(db, select(_sessions.c.id).where(_sessions.c.id.in_(ids)))
    }


def _delete_events(db: Connection, session_id: str, seqs: Select[tuple[int]]) -> int:
    """Delete the session's events whose numbers `seqs` (a query of `_EVENTS`) selects;
    how many went."""
    statement = delete(_events).where(
        _events.c.session_id == session_id, _events.c.seq.in_(seqs.scalar_subquery())
    )
    return int(execute(db, statement).rowcount)


# ------------------------------------------------------------------------- events only


def sessions_created_before(db: Tx, cutoff_ms: int, after: str | None, limit: int) -> list[str]:
    """A page of the sessions made before `cutoff_ms` (the only ones with events older
    than it), by id after `after`."""
    query = select(_sessions.c.id).where(_sessions.c.created_at < cutoff_ms)
    if after is not None:
        query = query.where(_sessions.c.id > after)
    return [str(row.id) for row in execute(db, query.order_by(_sessions.c.id).limit(limit))]


def drop_old_events(
    database: Database,
    session_id: str,
    cutoff_ms: int,
    *,
    dry_run: bool = False,
    batch: int = BATCH_ROWS,
) -> Tally:
    """Delete the session's run events from before `cutoff_ms` that belong to no run
    still open or ended since (a run's events go together), `batch` at a time; with
    `dry_run`, count them. Events are numbered in the order they were written, so the old
    ones are the first: the walk reads the session's events by number, from the first, and
    stops at the first one of the cutoff or later."""
    tally = Tally()
    with database.statements() as db:
        kept = [
            str(row.run_id)
            for row in execute(
                db,
                select(_runs.c.run_id).where(
                    _runs.c.session_id == session_id,
                    or_(
                        _runs.c.status == "running",
                        _runs.c.ended_at.is_(None),
                        _runs.c.ended_at >= cutoff_ms,
                    ),
                ),
            )
        ]
        first_new = db_scalar(
            db,
            select(_events.c.seq)
            .where(_events.c.session_id == session_id, _events.c.created_at >= cutoff_ms)
            .order_by(_events.c.seq)
            .limit(1),
        )
    old: list[ColumnElement[bool]] = [
        _EVENTS.c.session_id == session_id,
        _EVENTS.c.created_at < cutoff_ms,
    ]
    if kept:
        old.append(or_(_EVENTS.c.run_id.is_(None), _EVENTS.c.run_id.not_in(kept)))
    if first_new is not None:
        old.append(_EVENTS.c.seq < first_new)
    if dry_run:
        with database.statements() as db:
            tally.rows["run_events"] = db_scalar(db, select(func.count()).where(*old)) or 0
        return tally
    oldest = select(_EVENTS.c.seq).where(*old).order_by(_EVENTS.c.seq).limit(batch)
    while True:
        with database.statements() as db:
            deleted = _delete_events(db, session_id, oldest)
        tally.transactions += 1
        tally.rows["run_events"] += deleted
        if deleted < batch:
            return tally


# --------------------------------------------------------------------------- leftovers

LEFTOVERS: dict[str, tuple[Table, tuple[str, ...]]] = {
    "staged_messages": (_staged, ("entry_id",)),
    "cancel_hints": (_hints, ("seq",)),
    "trigger_deliveries": (_deliveries, ("trigger_id", "delivery_id")),
}
"""Each leftover's table and key."""


def drop_leftovers(
    database: Database, now_ms: int, *, dry_run: bool = False, batch: int = BATCH_ROWS
) -> Tally:
    """Delete what nothing reads again, `batch` rows a transaction (with `dry_run`, count
    it): staged messages of runs that ended (a save point moves a turn's staged messages
    into the tree and drops them; an attempt that outlived its run leaves its own), cancel
    hints older than `CANCEL_HINT_KEEP_MS`, and trigger deliveries received longer ago
    than they are remembered for (`DELIVERY_MEMORY_S`: deliveries are pruned so as others
    arrive, but none arrive to a trigger no longer used)."""
    tally = Tally()
    for name, (table, key) in LEFTOVERS.items():
        # Rows are picked in a subquery of an alias of the table the delete names.
        picked = table.alias(f"picked_{name}")
        gone = _gone(name, picked, now_ms)
        if dry_run:
            with database.statements() as db:
                counted = select(func.count()).select_from(picked).where(gone)
                tally.rows[name] = db_scalar(db, counted) or 0
            continue
        some = select(*(picked.c[k] for k in key)).where(gone).limit(batch)
        keys = tuple_(*(table.c[k] for k in key)) if len(key) > 1 else table.c[key[0]]
        while True:
            with database.statements() as db:
                deleted = int(execute(db, delete(table).where(keys.in_(some))).rowcount)
            tally.transactions += 1
            tally.rows[name] += deleted
            if deleted < batch:
                break
    return tally


def _gone(name: str, rows: FromClause, now_ms: int) -> ColumnElement[bool]:
    """Which of the leftover's `rows` nothing reads again."""
    if name == "staged_messages":
        open_run = exists().where(_runs.c.run_id == rows.c.run_id, _runs.c.status == "running")
        return ~open_run
    if name == "cancel_hints":
        return rows.c.created_at < now_ms - CANCEL_HINT_KEEP_MS
    return rows.c.received_at < now_ms - DELIVERY_MEMORY_S * 1000
