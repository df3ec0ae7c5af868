"""Initial schema: sessions, the entry tree, staging, display, runs, events, snapshots.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _session_fk() -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="CASCADE")


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(200)),
        sa.Column("owner", sa.String(200), index=True),
        sa.Column("workspace", sa.Text(), nullable=False),
        sa.Column("config", JSON, nullable=False),
        sa.Column("leaf_id", sa.String(64)),
        sa.Column("parent_session_id", sa.String(64)),
        sa.Column("forked_from_entry_id", sa.String(64)),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "session_entries",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(64), nullable=False, unique=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("parent_id", sa.String(64), index=True),
        sa.Column("type", sa.String(40), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("timestamp", sa.BigInteger(), nullable=False),
        sa.Column("run_id", sa.String(64)),
        _session_fk(),
    )
    op.create_index("ix_session_entries_session_seq", "session_entries", ["session_id", "seq"])
    op.create_table(
        "staged_messages",
        sa.Column("entry_id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), nullable=False, index=True),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "display_messages",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(64), nullable=False, unique=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("role", sa.String(40), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        _session_fk(),
    )
    op.create_index("ix_display_messages_session_seq", "display_messages", ["session_id", "seq"])
    op.create_table(
        "run_states",
        sa.Column("run_id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("workflow_id", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(40), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("phase", sa.String(20), nullable=False),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("usage", JSON, nullable=False),
        sa.Column("error", sa.Text()),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("ended_at", sa.BigInteger()),
        _session_fk(),
    )
    op.create_index("ix_run_states_session_started", "run_states", ["session_id", "started_at"])
    op.create_table(
        "run_events",
        sa.Column("seq", SEQ, primary_key=True, autoincrement=True),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("run_id", sa.String(64)),
        sa.Column("type", sa.String(60), nullable=False),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("key", sa.String(120)),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        _session_fk(),
        sa.UniqueConstraint("session_id", "key", name="uq_run_events_session_key"),
    )
    op.create_index("ix_run_events_session_seq", "run_events", ["session_id", "seq"])
    op.create_table(
        "turn_snapshots",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("payload", JSON, nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    for table in (
        "turn_snapshots",
        "run_events",
        "run_states",
        "display_messages",
        "staged_messages",
        "session_entries",
        "sessions",
    ):
        op.drop_table(table)
