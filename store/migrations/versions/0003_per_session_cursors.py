"""Per-session cursors: display messages and run events numbered 1, 2, 3, ... per session.

`seq` was one sequence across the store, so a new session's first number told its user
how busy everyone else was. Each table is rebuilt with the key (session_id, seq) and
existing rows renumbered per session in their old order; the session's row keeps the
last number handed out. Rows also record their payload's size, so pages can be bounded
in bytes without loading payloads.

A client holding an old (global) cursor sees nothing new until the session's numbers
pass it: clients reload after this upgrade.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _payload_bytes() -> str:
    """SQL for the size of a stored payload (PostgreSQL renders JSONB with spaces, a
    little larger than the compact JSON a response carries: close enough for a bound)."""
    if op.get_bind().dialect.name == "postgresql":
        return "octet_length(payload::text)"
    return "length(CAST(payload AS BLOB))"


def _session_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["session_id"], ["sessions.id"], ondelete="CASCADE", name=f"fk_{table}_session"
    )


def upgrade() -> None:
    op.create_table(
        "display_messages_numbered",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False, autoincrement=False),
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("role", sa.String(40), nullable=False),
        sa.Column("payload_bytes", sa.Integer(), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "seq", name="pk_display_messages"),
        sa.UniqueConstraint("id", name="uq_display_messages_id"),
        _session_fk("display_messages"),
    )
    op.execute(
        "INSERT INTO display_messages_numbered"
        " (session_id, seq, id, run_id, role, payload_bytes, payload, created_at)"
        " SELECT session_id, ROW_NUMBER() OVER (PARTITION BY session_id ORDER BY seq),"
        f" id, run_id, role, {_payload_bytes()}, payload, created_at FROM display_messages"
    )
    op.drop_table("display_messages")
    op.rename_table("display_messages_numbered", "display_messages")

    if op.get_bind().dialect.name == "postgresql":
        # Constraint names are schema-wide there; the new table takes this one.
        op.drop_constraint("uq_run_events_session_key", "run_events", type_="unique")
    op.create_table(
        "run_events_numbered",
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False, autoincrement=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("type", sa.String(60), nullable=False),
        sa.Column("payload_bytes", sa.Integer(), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("key", sa.String(120)),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "seq", name="pk_run_events"),
        sa.UniqueConstraint("session_id", "key", name="uq_run_events_session_key"),
        _session_fk("run_events"),
    )
    op.execute(
        "INSERT INTO run_events_numbered"
        " (session_id, seq, run_id, type, payload_bytes, payload, key, created_at)"
        " SELECT session_id, ROW_NUMBER() OVER (PARTITION BY session_id ORDER BY seq),"
        f" run_id, type, {_payload_bytes()}, payload, key, created_at FROM run_events"
    )
    op.drop_table("run_events")
    op.rename_table("run_events_numbered", "run_events")

    counters = (("last_message_seq", "display_messages"), ("last_event_seq", "run_events"))
    for counter, table in counters:
        op.add_column(
            "sessions", sa.Column(counter, sa.BigInteger(), nullable=False, server_default="0")
        )
        op.execute(
            f"UPDATE sessions SET {counter} = COALESCE("
            f"(SELECT MAX(seq) FROM {table} WHERE {table}.session_id = sessions.id), 0)"
        )


def downgrade() -> None:
    """Back to one sequence across the store, in the order rows were written."""
    for counter in ("last_event_seq", "last_message_seq"):
        # Native on SQLite too (3.35+); a rebuilt sessions table would cascade-delete.
        op.execute(f"ALTER TABLE sessions DROP COLUMN {counter}")
    if op.get_bind().dialect.name == "postgresql":
        op.drop_constraint("uq_run_events_session_key", "run_events", type_="unique")
    op.create_table(
        "run_events_global",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("type", sa.String(60), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("key", sa.String(120)),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
        sa.UniqueConstraint("session_id", "key", name="uq_run_events_session_key"),
    )
    op.execute(
        "INSERT INTO run_events_global (session_id, run_id, type, payload, key, created_at)"
        " SELECT session_id, run_id, type, payload, key, created_at FROM run_events"
        " ORDER BY created_at, session_id, seq"
    )
    op.drop_table("run_events")
    op.rename_table("run_events_global", "run_events")
    op.create_index("ix_run_events_session_seq", "run_events", ["session_id", "seq"])

    op.create_table(
        "display_messages_global",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(64), nullable=False, unique=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("role", sa.String(40), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE"),
    )
    op.execute(
        "INSERT INTO display_messages_global (id, session_id, run_id, role, payload, created_at)"
        " SELECT id, session_id, run_id, role, payload, created_at FROM display_messages"
        " ORDER BY created_at, session_id, seq"
    )
    op.drop_table("display_messages")
    op.rename_table("display_messages_global", "display_messages")
    op.create_index("ix_display_messages_session_seq", "display_messages", ["session_id", "seq"])
