"""Trigger deliveries: whether each was delivered (a remembered one that was not is taken
again when its sender resends it).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Deliveries remembered before were delivered, or forgotten when they were not.
    with op.batch_alter_table("trigger_deliveries") as table:
        table.add_column(
            sa.Column("delivered", sa.Boolean(), nullable=False, server_default=sa.true())
        )


def downgrade() -> None:
    with op.batch_alter_table("trigger_deliveries") as table:
        table.drop_column("delivered")
