"""Each training job keeps the highest rollout round its trainer has begun, so the
recovery sweep knows which rounds are open (begun and not trained) without the trainer:
a round past it was never asked for, and is not rolled out.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06 08:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("training_jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("rounds_begun", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    # In place on SQLite (>= 3.35): a table copy would cascade the ledger away (0011).
    with op.batch_alter_table("training_jobs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("rounds_begun")
