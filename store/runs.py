"""Run states: one row per run, the source of truth for a run's status and phase.

Read and written with Core statements only (see `store.statements`).
"""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import Update, bindparam, select, update
from sqlalchemy.orm import Session

from duragent.domain.messages import Usage
from duragent.domain.runs import Phase, RunStatus
from duragent.store.clock import now_ms
from duragent.store.records import RunRecord
from duragent.store.statements import execute
from duragent.store.tables import RunStateRow, table_of
from duragent.store.upsert import insert_ignore

_runs = table_of(RunStateRow)


def insert_run(
    db: Session, *, run_id: str, session_id: str, workflow_id: str, kind: str = "prompt"
) -> None:
    """Record a run as running; a second insert of the same run is ignored."""
    now = now_ms()
    insert_ignore(
        db,
        table_of(RunStateRow),
        [
            {
                "run_id": run_id,
                "session_id": session_id,
                "workflow_id": workflow_id,
                "kind": kind,
                "status": "running",
                "phase": "turn",
                "turns": 0,
                "usage": Usage().model_dump(),
                "error": None,
                "started_at": now,
                "updated_at": now,
                "ended_at": None,
            }
        ],
        conflict=["run_id"],
    )


def update_run(
    db: Session,
    run_id: str,
    *,
    status: RunStatus | None = None,
    phase: Phase | None = None,
    turns: int | None = None,
    usage: Usage | None = None,
    error: str | None = None,
    ended: bool = False,
) -> None:
    now = now_ms()
    values: dict[str, Any] = {"updated_at": now}
    if status is not None:
        values["status"] = status
    if phase is not None:
        values["phase"] = phase
    if turns is not None:
        values["turns"] = turns
    if usage is not None:
        values["usage"] = usage.model_dump()
    if error is not None:
        values["error"] = error
    if ended:
        values["ended_at"] = now
    execute(db, _update(tuple(values)), {"rid": run_id, **values})


@functools.cache
def _update(columns: tuple[str, ...]) -> Update:
    """The update of these columns, built once per set of columns (a turn's is always
    the same)."""
    return (
        update(_runs)
        .where(_runs.c.run_id == bindparam("rid"))
        .values({c: bindparam(c) for c in columns})
    )


_BY_ID = select(_runs).where(_runs.c.run_id == bindparam("rid"))


def get_run(db: Session, run_id: str) -> RunRecord | None:
    row = execute(db, _BY_ID, {"rid": run_id}).first()
    return RunRecord.model_validate(row) if row else None


def list_runs(db: Session, session_id: str, *, limit: int = 50) -> list[RunRecord]:
    rows = execute(
        db,
        select(_runs)
        .where(_runs.c.session_id == session_id)
        .order_by(_runs.c.started_at.desc())
        .limit(limit),
    )
    return [RunRecord.model_validate(row) for row in rows]


def running_runs(db: Session, session_id: str) -> list[RunRecord]:
    rows = execute(
        db, select(_runs).where(_runs.c.session_id == session_id, _runs.c.status == "running")
    )
    return [RunRecord.model_validate(row) for row in rows]
