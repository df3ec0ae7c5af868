"""Display messages: the UI's append-only replay of a session, never compacted."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from domain.messages import AgentMessage
from store.clock import now_ms
from store.cursor_order import hold_session_order
from store.records import DisplayMessage
from store.tables import DisplayMessageRow, table_of
from store.upsert import insert_ignore


def append_display(
    db: Session,
    session_id: str,
    run_id: str | None,
    messages: Sequence[tuple[str, AgentMessage]],
) -> None:
    """Append (id, message) pairs; ids already shown are skipped."""
    if not messages:
        return
    hold_session_order(db, session_id)
    now = now_ms()
    insert_ignore(
        db,
        table_of(DisplayMessageRow),
        [
            {
                "id": message_id,
                "session_id": session_id,
                "run_id": run_id,
                "role": message.role,
                "payload": message.model_dump(mode="json"),
                "created_at": now,
            }
            for message_id, message in messages
        ],
        conflict=["id"],
    )


def list_display(
    db: Session, session_id: str, *, after: int = 0, limit: int | None = None
) -> list[DisplayMessage]:
    query = (
        select(DisplayMessageRow)
        .where(DisplayMessageRow.session_id == session_id, DisplayMessageRow.seq > after)
        .order_by(DisplayMessageRow.seq)
    )
    if limit is not None:
        query = query.limit(limit)
    return [
        DisplayMessage(
            seq=row.seq,
            id=row.id,
            session_id=row.session_id,
            run_id=row.run_id,
            role=row.role,
            message=row.payload,
            created_at=row.created_at,
        )
        for row in db.scalars(query)
    ]
