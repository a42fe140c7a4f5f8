"""When a training job's trainer last called the orchestrator (`trainer_seen_at`), so a job
whose trainer is gone shows as stale instead of running for ever.

Revision ID: 0011
Revises: 0009
Create Date: 2026-11-24 10:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        batch.add_column(sa.Column("trainer_seen_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        batch.drop_column("trainer_seen_at")
