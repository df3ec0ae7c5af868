"""Sub-agent sessions: a session made by a `delegate` call names the run and the call.

`parent_session_id` (already there for forks) names the parent session; two columns name
the parent's run and its tool call, and an index finds a session's children.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("parent_run_id", sa.String(64)))
    op.add_column("sessions", sa.Column("parent_tool_call_id", sa.String(64)))
    op.create_index("ix_sessions_parent_session_id", "sessions", ["parent_session_id"])


def downgrade() -> None:
    op.drop_index("ix_sessions_parent_session_id", table_name="sessions")
    # Not batch mode: on SQLite that rebuilds the table, and dropping the old sessions
    # table would cascade to every row that refers to it. ALTER TABLE ... DROP COLUMN
    # (SQLite 3.35 and later, and PostgreSQL) keeps them.
    op.drop_column("sessions", "parent_tool_call_id")
    op.drop_column("sessions", "parent_run_id")
