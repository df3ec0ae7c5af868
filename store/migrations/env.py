"""Alembic environment: runs migrations on the engine the store hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Engine

from store.tables import Base

engine = context.config.attributes.get("engine")
if not isinstance(engine, Engine):
    raise RuntimeError("run migrations through store.db.migrate(), which supplies the engine")

with engine.begin() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    context.run_migrations()
