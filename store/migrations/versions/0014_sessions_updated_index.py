"""Sessions: an index on `updated_at`, so `duragent prune --older-than` finds the sessions
idle since its cutoff without reading every session (`store.retention`), and the newest
sessions list without a sort of them all.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-14
"""

from __future__ import annotations

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_sessions_updated_at", "sessions", ["updated_at"])


def downgrade() -> None:
    op.drop_index("ix_sessions_updated_at", table_name="sessions")
