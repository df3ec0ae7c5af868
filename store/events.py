"""Run events: appended by activities, read by clients from a cursor."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from pydantic import BaseModel
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from store.clock import now_ms
from store.cursor_order import hold_session_order
from store.records import StoredEvent
from store.tables import RunEventRow, table_of
from store.upsert import insert_ignore


class KeyedEvent(BaseModel):
    """An event with a dedup key: emitting it again (a retried step) stores nothing."""

    key: str
    event: BaseModel


def append_events(
    db: Session,
    session_id: str,
    run_id: str | None,
    events: Sequence[BaseModel | KeyedEvent],
) -> None:
    """Append events in the given order; keyed events already stored are skipped."""
    if not events:
        return
    hold_session_order(db, session_id)
    now = now_ms()
    table = table_of(RunEventRow)
    for keyed, group in groupby(events, key=lambda item: isinstance(item, KeyedEvent)):
        rows = [_row(session_id, run_id, item, now) for item in group]
        if keyed:
            insert_ignore(db, table, rows, conflict=["session_id", "key"])
        else:
            db.execute(table.insert(), rows)


def _row(
    session_id: str, run_id: str | None, item: BaseModel | KeyedEvent, now: int
) -> dict[str, object]:
    event, key = (item.event, item.key) if isinstance(item, KeyedEvent) else (item, None)
    payload = event.model_dump(mode="json")
    return {
        "session_id": session_id,
        "run_id": run_id,
        "type": payload["type"],
        "payload": payload,
        "key": key,
        "created_at": now,
    }


def read_events(
    db: Session,
    session_id: str,
    *,
    after: int = 0,
    limit: int = 500,
    run_id: str | None = None,
) -> list[StoredEvent]:
    query = (
        select(RunEventRow)
        .where(RunEventRow.session_id == session_id, RunEventRow.seq > after)
        .order_by(RunEventRow.seq)
        .limit(limit)
    )
    if run_id is not None:
        query = query.where(RunEventRow.run_id == run_id)
    return [
        StoredEvent(
            seq=row.seq,
            session_id=row.session_id,
            run_id=row.run_id,
            type=row.type,
            payload=row.payload,
            created_at=row.created_at,
        )
        for row in db.scalars(query)
    ]


def latest_seq(db: Session, session_id: str) -> int:
    seq = db.scalar(select(func.max(RunEventRow.seq)).where(RunEventRow.session_id == session_id))
    return int(seq or 0)
