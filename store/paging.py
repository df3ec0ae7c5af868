"""Pages of a session's cursor-read rows (display messages, run events), bounded in
count and in bytes.

A page is chosen from `(seq, payload_bytes)` alone, then only its rows are loaded, so a
session of large messages costs one page of payloads, not all of them. Choosing and
loading are two statements; rows of a session become visible in `seq` order
(`store.cursor_order`), so no row can appear inside the chosen range in between.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from duragent.store.tables import DisplayMessageRow, RunEventRow

PAGE_BYTES = 1_000_000
"""About how much one page may hold: it stops before an item would pass this, though it
always holds at least one item."""
ITEM_OVERHEAD_BYTES = 200
"""What an item adds around its payload in a response (ids, seq, times)."""

Row = TypeVar("Row", DisplayMessageRow, RunEventRow)


def json_size(payload: dict[str, Any]) -> int:
    """The payload's size in bytes as a response carries it (compact UTF-8 JSON)."""
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode())


@dataclass
class Page(Generic[Row]):
    rows: list[Row]
    """Oldest first."""
    beyond: bool
    """More rows exist past the page in the direction it was read (after its last row
    for `page_after`, before its first for `page_before`)."""


def page_after(
    db: Session,
    model: type[Row],
    session_id: str,
    after: int,
    *,
    limit: int,
    max_bytes: int = PAGE_BYTES,
) -> Page[Row]:
    """Up to `limit` rows with `seq > after`, oldest first."""
    sizes = db.execute(
        select(model.seq, model.payload_bytes)
        .where(model.session_id == session_id, model.seq > after)
        .order_by(model.seq)
        .limit(limit + 1)
    ).all()
    taken = _fitting([size for _, size in sizes[:limit]], max_bytes)
    if not taken:
        return Page(rows=[], beyond=False)
    last = sizes[taken - 1][0]
    rows = db.scalars(
        select(model)
        .where(model.session_id == session_id, model.seq > after, model.seq <= last)
        .order_by(model.seq)
    ).all()
    return Page(rows=list(rows), beyond=len(sizes) > taken)


def page_before(
    db: Session,
    model: type[Row],
    session_id: str,
    before: int | None,
    *,
    limit: int,
    max_bytes: int = PAGE_BYTES,
) -> Page[Row]:
    """The newest `limit` rows with `seq < before` (of all rows without `before`),
    oldest first."""
    bound = [model.seq < before] if before is not None else []
    sizes = db.execute(
        select(model.seq, model.payload_bytes)
        .where(model.session_id == session_id, *bound)
        .order_by(model.seq.desc())
        .limit(limit + 1)
    ).all()
    taken = _fitting([size for _, size in sizes[:limit]], max_bytes)
    if not taken:
        return Page(rows=[], beyond=False)
    first, last = sizes[taken - 1][0], sizes[0][0]
    rows = db.scalars(
        select(model)
        .where(model.session_id == session_id, model.seq >= first, model.seq <= last)
        .order_by(model.seq)
    ).all()
    return Page(rows=list(rows), beyond=len(sizes) > taken)


def any_before(db: Session, model: type[Row], session_id: str, seq: int) -> bool:
    """Whether the session has a row numbered below `seq`."""
    return bool(db.scalar(select(exists().where(model.session_id == session_id, model.seq < seq))))


def _fitting(sizes: list[int], max_bytes: int) -> int:
    """How many of `sizes`, in order, fit in `max_bytes` (at least one, if any)."""
    total = 0
    for count, size in enumerate(sizes):
        total += size + ITEM_OVERHEAD_BYTES
        if total > max_bytes and count > 0:
            return count
    return len(sizes)
