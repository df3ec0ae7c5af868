"""Activity outputs waiting for their save point (see `StagedMessageRow`)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import TypeAdapter
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from domain.messages import AgentMessage
from store.clock import now_ms
from store.tables import StagedMessageRow

_message: TypeAdapter[AgentMessage] = TypeAdapter(AgentMessage)


def stage_message(
    db: Session, *, entry_id: str, session_id: str, run_id: str, message: AgentMessage
) -> None:
    """Store (or replace, on a retried attempt) the message an activity produced."""
    payload = message.model_dump(mode="json")
    row = db.get(StagedMessageRow, entry_id)
    if row is None:
        db.add(
            StagedMessageRow(
                entry_id=entry_id,
                session_id=session_id,
                run_id=run_id,
                payload=payload,
                created_at=now_ms(),
            )
        )
    else:
        row.payload = payload


def staged_messages(db: Session, entry_ids: Sequence[str]) -> dict[str, AgentMessage]:
    if not entry_ids:
        return {}
    rows = db.scalars(select(StagedMessageRow).where(StagedMessageRow.entry_id.in_(entry_ids)))
    return {row.entry_id: _message.validate_python(row.payload) for row in rows}


def staged_message(db: Session, entry_id: str) -> AgentMessage | None:
    return staged_messages(db, [entry_id]).get(entry_id)


def drop_staged(db: Session, entry_ids: Sequence[str]) -> None:
    if entry_ids:
        db.execute(delete(StagedMessageRow).where(StagedMessageRow.entry_id.in_(entry_ids)))
