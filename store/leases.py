"""Worker leases and running calls (`activities.leases` keeps them)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import bindparam, delete, insert, select, update
from sqlalchemy.orm import Session

from duragent.store.statements import execute
from duragent.store.tables import RunningCallRow, WorkerLeaseRow, table_of
from duragent.store.upsert import insert_ignore

_LEASES = table_of(WorkerLeaseRow)
_CALLS = table_of(RunningCallRow)
_RENEW = (
    update(_LEASES)
    .where(_LEASES.c.worker_id == bindparam("worker"))
    .values(renewals=_LEASES.c.renewals + 1, renewed_at=bindparam("at"))
)
_ALL = select(_LEASES.c.worker_id, _LEASES.c.renewals)

Call = tuple[str, bytes, str]
"""(call key, task token, activity id)."""


def renew(db: Session, worker_id: str, at_ms: int) -> bool:
    """Renew the worker's lease; False if it had none (new, or taken for lost: then it
    has one again from now)."""
    if execute(db, _RENEW, {"worker": worker_id, "at": at_ms}).rowcount == 1:
        return True
    execute(db, insert(_LEASES), {"worker_id": worker_id, "renewals": 0, "renewed_at": at_ms})
    return False


def leases(db: Session) -> dict[str, int]:
    """Every lease: worker id -> renewals."""
    return {str(row.worker_id): int(row.renewals) for row in execute(db, _ALL)}


def claim_lost(db: Session, worker_id: str, renewals: int) -> list[Call]:
    """Take the lapsed lease of `worker_id` (still at `renewals`) and its calls, removing
    them; none if it was renewed meanwhile or another worker took it first."""
    taken = execute(
        db,
        delete(_LEASES).where(_LEASES.c.worker_id == worker_id, _LEASES.c.renewals == renewals),
    )
    if taken.rowcount != 1:
        return []
    rows = execute(
        db,
        select(_CALLS.c.call_key, _CALLS.c.task_token, _CALLS.c.activity_id).where(
            _CALLS.c.worker_id == worker_id
        ),
    )
    calls = [(str(r.call_key), bytes(r.task_token), str(r.activity_id)) for r in rows]
    execute(db, delete(_CALLS).where(_CALLS.c.worker_id == worker_id))
    return calls


def add_calls(db: Session, worker_id: str, calls: Sequence[Call], at_ms: int) -> None:
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
