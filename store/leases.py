"""Worker leases and running calls (`activities.leases` keeps them).

A lease's `renewed_at` is the store's clock, never a worker's: one clock for every
machine, so a lease lapses by the same measure wherever it is judged. The lapse check
reads only the lapsed leases (an index on `renewed_at`), so a round costs the same at
1,000 workers as at 2. On PostgreSQL an idle round (renew, then the lapsed leases) is
one statement on an autocommit connection (`idle_round`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, delete, select, text
from sqlalchemy.orm import Session

from duragent.store.statements import dialect_of, execute
from duragent.store.tables import RunningCallRow, WorkerLeaseRow, table_of
from duragent.store.upsert import insert_ignore

_LEASES = table_of(WorkerLeaseRow)
_CALLS = table_of(RunningCallRow)
_ALL = select(_LEASES.c.worker_id, _LEASES.c.renewals)

Call = tuple[str, bytes, str]
"""(call key, task token, activity id)."""

Lease = tuple[str, int]
"""(worker id, renewals)."""

CLOCKS = {
    "postgresql": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    "sqlite": "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
}
"""The store's clock in milliseconds, by dialect (tests set another)."""


def clock(dialect: str) -> str:
    return CLOCKS[dialect]


def renew(db: Session | Connection, worker_id: str) -> bool:
    """Renew the worker's lease; False if it had none (new, or taken for lost: then it
    has one again from now)."""
    now = clock(dialect_of(db))
    renewed = execute(
        db,
        text(
            "UPDATE worker_leases SET renewals = renewals + 1, renewed_at = "
            f"{now} WHERE worker_id = :worker"
        ),
        {"worker": worker_id},
    )
    if renewed.rowcount == 1:
        return True
    execute(
        db,
        text(
            "INSERT INTO worker_leases (worker_id, renewals, renewed_at)"
            f" VALUES (:worker, 0, {now})"
        ),
        {"worker": worker_id},
    )
    return False


def lapsed(db: Session | Connection, worker_id: str, lease_ms: int) -> list[Lease]:
    """The other workers' leases not renewed for `lease_ms` (store clock)."""
    now = clock(dialect_of(db))
    rows = execute(
        db,
        text(
            "SELECT worker_id, renewals FROM worker_leases"
            f" WHERE renewed_at < {now} - :lease AND worker_id <> :worker"
        ),
        {"lease": lease_ms, "worker": worker_id},
    )
    return [(str(r.worker_id), int(r.renewals)) for r in rows]


def idle_round(connection: Connection, worker_id: str, lease_ms: int) -> list[Lease] | None:
    """PostgreSQL, on an autocommit connection: renew and read the lapsed leases in one
    statement. None if the worker had no lease (then `renew` makes it one)."""
    now = clock("postgresql")
    rows = connection.execute(
        text(
            "WITH renewed AS (UPDATE worker_leases SET renewals = renewals + 1,"
            f" renewed_at = {now} WHERE worker_id = :worker RETURNING worker_id, renewals)"
            " SELECT worker_id, renewals, true AS own FROM renewed"
            " UNION ALL SELECT worker_id, renewals, false FROM worker_leases"
            f" WHERE renewed_at < {now} - :lease AND worker_id <> :worker"
        ),
        {"worker": worker_id, "lease": lease_ms},
    ).all()
    if not any(r.own for r in rows):
        return None
    return [(str(r.worker_id), int(r.renewals)) for r in rows if not r.own]


def leases(db: Session) -> dict[str, int]:
    """Every lease: worker id -> renewals."""
    return {str(row.worker_id): int(row.renewals) for row in execute(db, _ALL)}


def claim_lost(db: Session, worker_id: str, renewals: int) -> list[Call] | None:
    """Take the lapsed lease of `worker_id` (still at `renewals`) and its calls, removing
    them; None if it was renewed meanwhile or another worker took it first."""
    taken = execute(
        db,
        delete(_LEASES).where(_LEASES.c.worker_id == worker_id, _LEASES.c.renewals == renewals),
    )
    if taken.rowcount != 1:
        return None
    rows = execute(
        db,
        select(_CALLS.c.call_key, _CALLS.c.task_token, _CALLS.c.activity_id).where(
            _CALLS.c.worker_id == worker_id
        ),
    )
    calls = [(str(r.call_key), bytes(r.task_token), str(r.activity_id)) for r in rows]
    execute(db, delete(_CALLS).where(_CALLS.c.worker_id == worker_id))
    return calls


def add_calls(db: Session | Connection, worker_id: str, calls: Sequence[Call], at_ms: int) -> None:
    """Record running calls; one recorded already (a round whose commit was not
    confirmed, then tried again) stays as it is."""
    rows = [
        {
            "call_key": key,
            "worker_id": worker_id,
            "task_token": token,
            "activity_id": activity,
            "started_at": at_ms,
        }
        for key, token, activity in calls
    ]
    insert_ignore(db, _CALLS, rows, conflict=["call_key"])


def drop_calls(db: Session, keys: Sequence[str]) -> None:
    if keys:
        execute(db, delete(_CALLS).where(_CALLS.c.call_key.in_(keys)))


def drop_worker(db: Session, worker_id: str) -> None:
    """A worker that stops cleanly: its lease and calls go."""
    execute(db, delete(_CALLS).where(_CALLS.c.worker_id == worker_id))
    execute(db, delete(_LEASES).where(_LEASES.c.worker_id == worker_id))
