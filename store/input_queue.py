"""The persisted input queue: items wait here until a run takes them.

Taking an item is a compare-and-set on its status, so an item is consumed at most once
even when two runs (or a retried step) race for it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import TypeAdapter
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from domain.messages import AgentMessage, text_of
from store.clock import now_ms
from store.records import QueueItem
from store.tables import InputQueueRow

QueueKind = Literal["next_turn", "guidance"]
_message: TypeAdapter[AgentMessage] = TypeAdapter(AgentMessage)


def _record(row: InputQueueRow) -> QueueItem:
    return QueueItem(
        id=row.id,
        session_id=row.session_id,
        kind=row.kind,
        status=row.status,
        run_id=row.run_id,
        text=row.text,
        message=_message.validate_python(row.message),
        position=row.position,
        created_at=row.created_at,
        updated_at=row.updated_at,
        consumed_at=row.consumed_at,
    )


def add_item(
    db: Session,
    *,
    item_id: str,
    session_id: str,
    kind: QueueKind,
    message: AgentMessage,
    run_id: str | None = None,
) -> QueueItem:
    """Queue a message; adding an id that is already queued returns the stored item."""
    existing = db.get(InputQueueRow, item_id)
    if existing is not None:
        return _record(existing)
    position = db.scalar(
        select(func.coalesce(func.max(InputQueueRow.position), 0)).where(
            InputQueueRow.session_id == session_id
        )
    )
    now = now_ms()
    row = InputQueueRow(
        id=item_id,
        session_id=session_id,
        kind=kind,
        status="pending",
        run_id=run_id,
        text=text_of(message.content),
        message=message.model_dump(mode="json"),
        position=(position or 0) + 1,
        created_at=now,
        updated_at=now,
        consumed_at=None,
    )
    db.add(row)
    db.flush()
    return _record(row)


def list_items(
    db: Session, session_id: str, *, status: str | None = "pending", kind: QueueKind | None = None
) -> list[QueueItem]:
    query = select(InputQueueRow).where(InputQueueRow.session_id == session_id)
    if status is not None:
        query = query.where(InputQueueRow.status == status)
    if kind is not None:
        query = query.where(InputQueueRow.kind == kind)
    return [_record(row) for row in db.scalars(query.order_by(InputQueueRow.position))]


def consume(db: Session, item_id: str, run_id: str) -> bool:
    """pending -> consumed, bound to `run_id`; False if the item is no longer pending."""
    now = now_ms()
    result = db.execute(
        update(InputQueueRow)
        .where(InputQueueRow.id == item_id, InputQueueRow.status == "pending")
        .values(status="consumed", run_id=run_id, consumed_at=now, updated_at=now)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


def consumed_by(db: Session, run_id: str, kind: QueueKind) -> list[QueueItem]:
    rows = db.scalars(
        select(InputQueueRow)
        .where(
            InputQueueRow.run_id == run_id,
            InputQueueRow.kind == kind,
            InputQueueRow.status == "consumed",
        )
        .order_by(InputQueueRow.position)
    )
    return [_record(row) for row in rows]
