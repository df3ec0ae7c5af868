"""Guidance intent: kept on the item, so a turn's activity can act on guidance itself.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("input_queue") as table:
        table.add_column(sa.Column("intent", sa.String(20), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("input_queue") as table:
        table.drop_column("intent")
