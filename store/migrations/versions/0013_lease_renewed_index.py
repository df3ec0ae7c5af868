"""Worker leases: an index on `renewed_at`, so the lapse check of each renewal reads only
the lapsed leases, not every worker's (`activities.leases`).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-12
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_worker_leases_renewed_at", "worker_leases", ["renewed_at"])


def downgrade() -> None:
    op.drop_index("ix_worker_leases_renewed_at", table_name="worker_leases")
