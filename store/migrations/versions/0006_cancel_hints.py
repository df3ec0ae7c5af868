"""Cancel hints: the nudge that makes a cancelled call's worker heartbeat at once.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "cancel_hints",
        # SQLite autoincrements only INTEGER PRIMARY KEY; PostgreSQL wants 64 bits.
        sa.Column(
            "seq",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("workflow_id", sa.String(200), nullable=False),
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("activity_id", sa.String(200), nullable=False),
        sa.Column("origin", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_cancel_hints_created_at", "cancel_hints", ["created_at"])


def downgrade() -> None:
    op.drop_table("cancel_hints")
