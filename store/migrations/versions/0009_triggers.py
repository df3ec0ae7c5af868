"""Triggers: webhooks made into prompts, and the deliveries they remember against replays.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "triggers",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("secret", sa.String(200), nullable=False),
        sa.Column("session_id", sa.String(64), nullable=True),
        sa.Column("template", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("secret_set_at", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_triggers_owner", "triggers", ["owner"])
    op.create_table(
        "trigger_deliveries",
        sa.Column(
            "trigger_id",
            sa.String(64),
            sa.ForeignKey("triggers.id", ondelete="CASCADE"),
            nullable=False,
        ),
        sa.Column("delivery_id", sa.String(200), nullable=False),
        sa.Column("signature", sa.String(80), nullable=False),
        sa.Column("received_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("trigger_id", "delivery_id", name="pk_trigger_deliveries"),
        sa.UniqueConstraint("trigger_id", "signature", name="uq_trigger_deliveries_signature"),
    )
    op.create_index("ix_trigger_deliveries_received_at", "trigger_deliveries", ["received_at"])


def downgrade() -> None:
    op.drop_table("trigger_deliveries")
    op.drop_table("triggers")
