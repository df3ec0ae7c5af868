"""Insert-if-absent for the dialects we support: how activities stay idempotent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def insert_ignore(
    db: Session, table: Table, rows: Sequence[dict[str, Any]], *, conflict: Sequence[str]
) -> None:
    """Insert rows, silently skipping any that collide on the `conflict` columns."""
    if not rows:
        return
    dialect = db.get_bind().dialect.name
    if dialect == "sqlite":
        db.execute(
            sqlite.insert(table).on_conflict_do_nothing(index_elements=list(conflict)),
            list(rows),
        )
    elif dialect == "postgresql":
        db.execute(
            postgresql.insert(table).on_conflict_do_nothing(index_elements=list(conflict)),
            list(rows),
        )
    else:  # pragma: no cover - other dialects: check first, then insert
        for row in rows:
            key = {c: row[c] for c in conflict}
            exists = db.query(table).filter_by(**key).first()
            if exists is None:
                db.execute(table.insert(), [row])
