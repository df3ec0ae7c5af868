"""Running statements on the transaction's connection, past the ORM session.

On a turn's hot paths the ORM cost several times what the database did: a select or an
update built on each call and run through `Session.execute` took about 0.35-0.5 ms, the
same statement built once (with bind parameters) and run on the connection about 0.06
ms on SQLite. The tables written this way (sessions, runs, staged messages) are read this
way too, never as ORM objects, so no object in a session's identity map can go stale
behind such a write, and there is no autoflush to order writes by. Work that only runs
such statements opens its transaction on an engine connection (`Database.statements`),
which costs about half what an ORM session's does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, CursorResult, Executable
from sqlalchemy.orm import Session

Params = Mapping[str, Any] | Sequence[Mapping[str, Any]] | None
Tx = Session | Connection
"""A transaction that runs statements: an ORM session's (`Database.transaction`), or the
engine connection's (`Database.statements`)."""


def execute(db: Tx, statement: Executable, params: Params = None) -> CursorResult[Any]:
    """Run `statement` in `db`'s transaction, on its connection (no ORM bookkeeping)."""
    connection = db if isinstance(db, Connection) else db.connection()
    return connection.execute(statement, params)


def dialect_of(db: Tx) -> str:
    """The name of the database's dialect (`sqlite`, `postgresql`)."""
    return (db if isinstance(db, Connection) else db.get_bind()).dialect.name
