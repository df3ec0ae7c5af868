"""Run events: appended by activities, read by clients from a cursor."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from duragent.store import paging
from duragent.store.clock import now_ms
from duragent.store.cursor_order import take_numbers
from duragent.store.errors import SessionNotFound
from duragent.store.paging import PAGE_BYTES, json_size
from duragent.store.records import StoredEvent
from duragent.store.statements import Tx, dialect_of, execute
from duragent.store.tables import RunEventRow, table_of
from duragent.store.upsert import insert_ignore


class KeyedEvent(BaseModel):
    """An event with a dedup key: emitting it again (a retried step) stores nothing."""

    key: str
    event: BaseModel


def keyed(prefix: str, items: Sequence[BaseModel]) -> list[KeyedEvent]:
    """The events keyed `prefix/0`, `prefix/1`, ...: a step that emits the same events
    under the same prefix again stores none of them twice."""
    return [KeyedEvent(key=f"{prefix}/{i}", event=event) for i, event in enumerate(items)]


def append_events(
    db: Tx,
    session_id: str,
    run_id: str | None,
    events: Sequence[BaseModel | KeyedEvent],
) -> None:
    """Append events in the given order, numbered after the session's last event.

    A keyed event already stored (a retried step emits its events again) is skipped
    without a check first: that costs a statement on every append to save a number on
    the rare retry, and a gap in the numbers is harmless to a reader.
    """
    if not events:
        return
    now = now_ms()
    if dialect_of(db) == "postgresql":
        _append_in_one_statement(db, session_id, run_id, events, now)
        return
    first = take_numbers(db, session_id, "events", len(events))
    rows = [_row(session_id, run_id, seq, item, now) for seq, item in enumerate(events, first)]
    insert_ignore(db, table_of(RunEventRow), rows, conflict=["session_id", "key"])


# PostgreSQL numbers and inserts a batch in one statement (the counter's row lock is held
# to the statement's end, or the transaction's: `store.cursor_order`'s commit order holds):
# a streamed reply flushes its deltas many times a second, and each statement saved there
# is one the shared store does not run per flush.
_APPEND_PG = text(
    """
    WITH numbered AS (
        UPDATE sessions SET last_event_seq = last_event_seq + CAST(:count AS bigint)
        WHERE id = CAST(:sid AS varchar)
        RETURNING last_event_seq - CAST(:count AS bigint) AS base
    ), inserted AS (
        INSERT INTO run_events
            (session_id, seq, run_id, type, payload_bytes, payload, key, created_at)
        SELECT CAST(:sid AS varchar), numbered.base + r.i, CAST(:run_id AS varchar), r.type,
            r.payload_bytes, r.payload, r.key, CAST(:now AS bigint)
        FROM numbered, jsonb_to_recordset(CAST(:rows AS jsonb))
            AS r(i bigint, type text, payload_bytes integer, payload jsonb, key text)
        ON CONFLICT (session_id, key) DO NOTHING
    )
    SELECT base FROM numbered
    """
)


def _append_in_one_statement(
    db: Tx, session_id: str, run_id: str | None, events: Sequence[BaseModel | KeyedEvent], now: int
) -> None:
    rows = []
    for i, item in enumerate(events, 1):
        row = _row(session_id, run_id, i, item, now)
        rows.append({k: row[k] for k in ("type", "payload_bytes", "payload", "key")} | {"i": i})
    params = {
        "count": len(rows),
        "sid": session_id,
        "run_id": run_id,
        "now": now,
        "rows": json.dumps(rows, separators=(",", ":")),
    }
    if execute(db, _APPEND_PG, params).first() is None:
        raise SessionNotFound(session_id)


def _row(
    session_id: str, run_id: str | None, seq: int, item: BaseModel | KeyedEvent, now: int
) -> dict[str, object]:
    event, key = (item.event, item.key) if isinstance(item, KeyedEvent) else (item, None)
    payload = event.model_dump(mode="json")
    return {
        "session_id": session_id,
        "seq": seq,
        "run_id": run_id,
        "type": payload["type"],
        "payload_bytes": json_size(payload),
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
    """Up to `limit` events numbered after `after`, oldest first."""
    query = (
        select(RunEventRow)
        .where(RunEventRow.session_id == session_id, RunEventRow.seq > after)
        .order_by(RunEventRow.seq)
        .limit(limit)
    )
    if run_id is not None:
        query = query.where(RunEventRow.run_id == run_id)
    return [StoredEvent.model_validate(row) for row in db.scalars(query)]


def latest_for_call(
    db: Session, session_id: str, event_type: str, call_id: str
) -> dict[str, Any] | None:
    """The payload of the session's newest event of `event_type` about tool call
    `call_id` (an approval decided, a question answered), if any."""
    query = (
        select(RunEventRow.payload)
        .where(RunEventRow.session_id == session_id, RunEventRow.type == event_type)
        .order_by(RunEventRow.seq.desc())
    )
    for payload in db.scalars(query):
        if payload.get("call_id") == call_id:
            return dict(payload)
    return None


def events_page(
    db: Session, session_id: str, *, after: int | None, limit: int, max_bytes: int = PAGE_BYTES
) -> tuple[list[StoredEvent], bool]:
    """A page bounded in count and bytes, and whether more events follow it: the events
    after `after`, or the newest ones without a cursor (then nothing follows)."""
    if after is None:
        page = paging.page_before(
            db, RunEventRow, session_id, None, limit=limit, max_bytes=max_bytes
        )
        return [StoredEvent.model_validate(row) for row in page.rows], False
    page = paging.page_after(db, RunEventRow, session_id, after, limit=limit, max_bytes=max_bytes)
    return [StoredEvent.model_validate(row) for row in page.rows], page.beyond


def latest_seq(db: Session, session_id: str) -> int:
    """The number of the session's newest event (0 before the first)."""
    seq = db.scalar(select(func.max(RunEventRow.seq)).where(RunEventRow.session_id == session_id))
    return int(seq or 0)
