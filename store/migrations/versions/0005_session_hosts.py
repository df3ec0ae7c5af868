"""Session hosts: the host whose workspace a session works in (sticky workspaces), and
the pieces of a workspace moving between hosts.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable: sessions made before it get their host at their next run.
    op.add_column("sessions", sa.Column("host", sa.String(63)))
    op.create_table(
        "workspace_chunks",
        sa.Column("transfer_id", sa.String(64), nullable=False),
        sa.Column("seq", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("transfer_id", "seq", name="pk_workspace_chunks"),
    )


def downgrade() -> None:
    op.drop_table("workspace_chunks")
    # Not batch mode, as in 0004: ALTER TABLE ... DROP COLUMN keeps the rows that refer
    # to the sessions table.
    op.drop_column("sessions", "host")
