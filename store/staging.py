"""Activity outputs waiting for their save point (see `StagedMessageRow`)."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import TypeAdapter
from sqlalchemy import bindparam, delete, select
from sqlalchemy.orm import Session

from domain.messages import AgentMessage
from store.clock import now_ms
from store.statements import execute
from store.tables import StagedMessageRow, table_of
from store.upsert import insert_or_replace

_message: TypeAdapter[AgentMessage] = TypeAdapter(AgentMessage)
_staged = table_of(StagedMessageRow)


# Built once (see `store.statements`).
_READ = select(_staged.c.entry_id, _staged.c.payload).where(
    _staged.c.entry_id.in_(bindparam("ids", expanding=True))
)
_DROP = delete(_staged).where(_staged.c.entry_id.in_(bindparam("ids", expanding=True)))


def stage_message(
    db: Session, *, entry_id: str, session_id: str, run_id: str, message: AgentMessage
) -> None:
    """Store (or replace, on a retried attempt) the message an activity produced."""
    row = {
        "entry_id": entry_id,
        "session_id": session_id,
        "run_id": run_id,
        "payload": message.model_dump(mode="json"),
        "created_at": now_ms(),
    }
    # A retried attempt replaces the payload; the row keeps its session, run and time.
    insert_or_replace(db, _staged, row, conflict=["entry_id"], replace=["payload"])


def staged_messages(db: Session, entry_ids: Sequence[str]) -> dict[str, AgentMessage]:
    if not entry_ids:
        return {}
    rows = execute(db, _READ, {"ids": list(entry_ids)})
    return {row.entry_id: _message.validate_python(row.payload) for row in rows}


def staged_message(db: Session, entry_id: str) -> AgentMessage | None:
    return staged_messages(db, [entry_id]).get(entry_id)


def drop_staged(db: Session, entry_ids: Sequence[str]) -> None:
    if entry_ids:
        execute(db, _DROP, {"ids": list(entry_ids)})
