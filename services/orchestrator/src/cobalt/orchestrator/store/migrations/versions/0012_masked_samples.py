"""Infrastructure errors are not rewards: each training group counts the responses the
sandbox failed to judge (masked, never written as samples), and a group left with fewer
than two judged responses is kept in the ledger as `dropped`, with its reason.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-28 01:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("training_groups", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("masked_samples", sa.Integer(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("drop_reason", sa.Text(), nullable=True))


def downgrade() -> None:
    # In place on SQLite (>= 3.35): a table copy would cascade every sample away (0011).
    with op.batch_alter_table("training_groups", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("drop_reason")
        batch_op.drop_column("masked_samples")
