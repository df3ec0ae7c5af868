"""Cancel hints: rows that tell every worker process "this call's cancellation is on its
way; if it runs here, heartbeat now" (`activities.cancel_hints` writes and reads them).
SQLite's only: on PostgreSQL hints go by `NOTIFY`, and this table stays empty.

The hot read is one indexed range scan on the primary key (`seq > last`), built once.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import bindparam, delete, func, insert, select
from sqlalchemy.orm import Session

from duragent.store.statements import execute
from duragent.store.tables import CancelHintRow, table_of

_TABLE = table_of(CancelHintRow)
_INSERT = insert(_TABLE)
_AFTER_SEQ = (
    select(_TABLE.c.seq, _TABLE.c.workflow_id, _TABLE.c.run_id, _TABLE.c.activity_id)
    .where(_TABLE.c.seq > bindparam("after"), _TABLE.c.origin != bindparam("origin"))
    .order_by(_TABLE.c.seq)
)

Hint = tuple[int, str, str, str]
"""(seq, workflow id, run id, activity id)."""


def add_hints(db: Session, hints: Sequence[tuple[str, str, str]], origin: str, at_ms: int) -> None:
    """Store hints (workflow id, run id, activity id) written by `origin`."""
    if hints:
        rows = [
            {"workflow_id": w, "run_id": r, "activity_id": a, "origin": origin, "created_at": at_ms}
            for w, r, a in hints
        ]
        execute(db, _INSERT, rows)


def hints_after(db: Session, after: int, origin: str) -> list[Hint]:
    """The hints stored after `after` (a seq) by any process but `origin`, in order."""
    rows = execute(db, _AFTER_SEQ, {"after": after, "origin": origin})
    return [(int(r.seq), str(r.workflow_id), str(r.run_id), str(r.activity_id)) for r in rows]


def last_seq(db: Session) -> int:
    """The newest hint's seq (0 if none)."""
    return int(db.scalar(select(func.coalesce(func.max(_TABLE.c.seq), 0))) or 0)


def prune(db: Session, before_ms: int) -> None:
    """Drop the hints written before `before_ms`."""
    execute(db, delete(_TABLE).where(_TABLE.c.created_at < before_ms))
