"""Commit order for the tables clients read from a cursor (`seq > cursor`).

A client that has read up to `seq` N never looks below N again, so a row must not become
visible after a row with a higher `seq` of the same session. SQLite has one writer at a
time, so its sequence order is its commit order. PostgreSQL hands out sequence values at
insert and shows rows at commit: two writers of one session could commit out of order,
and a reader between the two commits would skip the earlier row for good. A
transaction-scoped advisory lock per session makes that session's writers take turns
from their first cursor-table insert to their commit.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session


def hold_session_order(db: Session, session_id: str) -> None:
    """Call before inserting cursor-read rows of `session_id` in this transaction."""
    if db.get_bind().dialect.name == "postgresql":
        db.execute(
            text("SELECT pg_advisory_xact_lock(hashtextextended(:session_id, 0))"),
            {"session_id": session_id},
        )
