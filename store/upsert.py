"""Insert-if-absent for the dialects we support: how activities stay idempotent.

The statements are built once per table and conflict target (see `store.statements`):
building one on each call cost more than running it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Insert, Table
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from duragent.store.statements import Tx, dialect_of, execute

INSERTS: dict[str, type[sqlite.Insert] | type[postgresql.Insert]] = {
    "sqlite": sqlite.Insert,
    "postgresql": postgresql.Insert,
}


@functools.cache
def _ignoring(dialect: str, table: Table, conflict: tuple[str, ...]) -> Insert:
    return INSERTS[dialect](table).on_conflict_do_nothing(index_elements=list(conflict))


def insert_ignore(
    db: Tx, table: Table, rows: Sequence[dict[str, Any]], *, conflict: Sequence[str]
) -> None:
    """Insert rows, silently skipping any that collide on the `conflict` columns."""
    if not rows:
        return
    dialect = dialect_of(db)
    if dialect in INSERTS:
        execute(db, _ignoring(dialect, table, tuple(conflict)), list(rows))
    else:  # pragma: no cover - other dialects: check first, then insert
        assert isinstance(db, Session), f"no insert-if-absent on {dialect} outside a session"
        for row in rows:
            key = {c: row[c] for c in conflict}
            exists = db.query(table).filter_by(**key).first()
            if exists is None:
                db.execute(table.insert(), [row])
