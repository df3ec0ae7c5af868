"""Display messages: the UI's append-only replay of a session, never compacted."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.orm import Session

from duragent.domain.messages import AgentMessage
from duragent.store import paging
from duragent.store.clock import now_ms
from duragent.store.cursor_order import take_numbers
from duragent.store.paging import PAGE_BYTES, json_size
from duragent.store.records import DisplayMessage
from duragent.store.tables import DisplayMessageRow, table_of
from duragent.store.upsert import insert_ignore


def append_display(
    db: Session,
    session_id: str,
    run_id: str | None,
    messages: Sequence[tuple[str, AgentMessage]],
    *,
    leaf_id: str | None = None,
    times: Mapping[str, int] | None = None,
) -> None:
    """Append (id, message) pairs, numbered after the session's last message; with
    `leaf_id`, move the session's leaf there in the same statement that numbers them.
    Each is shown as made now, or at its time in `times` (an import's, by id).

    Callers pass what they newly committed (a retried step finds its entries stored and
    shows nothing again), so there is no check first: an id shown already is skipped,
    and only leaves a gap in the numbers.
    """
    if not messages:
        return
    first = take_numbers(db, session_id, "messages", len(messages), leaf_id=leaf_id)
    now = now_ms()
    rows = []
    for seq, (message_id, message) in enumerate(messages, first):
        payload = message.model_dump(mode="json")
        rows.append(
            {
                "session_id": session_id,
                "seq": seq,
                "id": message_id,
                "run_id": run_id,
                "role": message.role,
                "payload_bytes": json_size(payload),
                "payload": payload,
                "created_at": now if times is None else times.get(message_id, now),
            }
        )
    insert_ignore(db, table_of(DisplayMessageRow), rows, conflict=["id"])


def list_display(
    db: Session, session_id: str, *, after: int = 0, limit: int | None = None
) -> list[DisplayMessage]:
    """Messages numbered after `after`, oldest first."""
    query = (
        select(DisplayMessageRow)
        .where(DisplayMessageRow.session_id == session_id, DisplayMessageRow.seq > after)
        .order_by(DisplayMessageRow.seq)
    )
    if limit is not None:
        query = query.limit(limit)
    return [DisplayMessage.model_validate(row) for row in db.scalars(query)]


def messages_after(
    db: Session, session_id: str, after: int, *, limit: int, max_bytes: int = PAGE_BYTES
) -> tuple[list[DisplayMessage], bool]:
    """A page of the messages after `after` (bounded in count and bytes), oldest first,
    and whether more follow it."""
    page = paging.page_after(
        db, DisplayMessageRow, session_id, after, limit=limit, max_bytes=max_bytes
    )
    return [DisplayMessage.model_validate(row) for row in page.rows], page.beyond


def messages_before(
    db: Session, session_id: str, before: int | None, *, limit: int, max_bytes: int = PAGE_BYTES
) -> tuple[list[DisplayMessage], bool]:
    """The page just before `before` (the newest page without it), oldest first, and
    whether earlier messages exist."""
    page = paging.page_before(
        db, DisplayMessageRow, session_id, before, limit=limit, max_bytes=max_bytes
    )
    return [DisplayMessage.model_validate(row) for row in page.rows], page.beyond


def any_before(db: Session, session_id: str, seq: int) -> bool:
    """Whether the session has a message numbered below `seq`."""
    return paging.any_before(db, DisplayMessageRow, session_id, seq)
