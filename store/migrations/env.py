"""Alembic environment: runs migrations in the connection the store hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from duragent.store.tables import Base

connection = context.config.attributes.get("connection")
if not isinstance(connection, Connection):
    raise RuntimeError("run migrations through store.db.migrate(), which supplies a connection")

# The connection is inside migrate()'s transaction (and lock): it commits there.
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
context.run_migrations()
