"""Worker leases and the calls running under them: a lost worker's calls move on at once.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "worker_leases",
        sa.Column("worker_id", sa.String(120), primary_key=True),
        sa.Column("renewals", sa.BigInteger(), nullable=False),
        sa.Column("renewed_at", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "running_calls",
        sa.Column("call_key", sa.String(64), primary_key=True),
        sa.Column("worker_id", sa.String(120), nullable=False),
        sa.Column("task_token", sa.LargeBinary(), nullable=False),
        sa.Column("activity_id", sa.String(200), nullable=False),
        sa.Column("started_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_running_calls_worker_id", "running_calls", ["worker_id"])


def downgrade() -> None:
    op.drop_table("running_calls")
    op.drop_table("worker_leases")
