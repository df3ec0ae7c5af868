"""Schedules' rows: the owner and session of each Temporal schedule duragent made."""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from duragent.store.clock import now_ms
from duragent.store.records import ScheduleRecord
from duragent.store.tables import ScheduleRow


def add_schedule(
    db: Session, *, schedule_id: str, session_id: str, owner: str | None
) -> ScheduleRecord:
    row = ScheduleRow(id=schedule_id, session_id=session_id, owner=owner, created_at=now_ms())
    db.add(row)
    db.flush()
    return ScheduleRecord.model_validate(row)


def get_schedule(db: Session, schedule_id: str) -> ScheduleRecord | None:
    row = db.get(ScheduleRow, schedule_id)
    return ScheduleRecord.model_validate(row) if row else None


def list_schedules(
    db: Session, *, session_id: str | None = None, owner: str | None = None, limit: int = 100
) -> list[ScheduleRecord]:
    """Schedules, oldest first: of a session, or of an owner (None: those of no owner)."""
    query = select(ScheduleRow)
    if session_id is not None:
        query = query.where(ScheduleRow.session_id == session_id)
    else:
        query = query.where(
            ScheduleRow.owner.is_(None) if owner is None else ScheduleRow.owner == owner
        )
    query = query.order_by(ScheduleRow.created_at, ScheduleRow.id).limit(limit)
    return [ScheduleRecord.model_validate(row) for row in db.scalars(query)]


def count_schedules(db: Session, owner: str | None) -> int:
    """How many schedules `owner` has (None: those of no owner)."""
    mine = ScheduleRow.owner.is_(None) if owner is None else ScheduleRow.owner == owner
    counted = db.scalar(select(func.count()).select_from(ScheduleRow).where(mine))
    return int(counted or 0)


def delete_schedule(db: Session, schedule_id: str) -> bool:
    result = db.execute(delete(ScheduleRow).where(ScheduleRow.id == schedule_id))
    return bool(result.rowcount)  # type: ignore[attr-defined]
