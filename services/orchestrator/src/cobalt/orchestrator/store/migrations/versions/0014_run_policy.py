"""Provenance of weights: a run records the policy that produced it (what the inference
service reported serving when the run started: directory, digest, training job and step),
with the job in a column of its own so a training job's page finds the runs evaluated
with its checkpoints; a training step records the checkpoint it published.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06 11:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("policy", sa.JSON(none_as_null=True), nullable=True))
        batch_op.add_column(sa.Column("policy_job_id", sa.Integer(), nullable=True))
        batch_op.create_index("ix_runs_policy_job_id", ["policy_job_id"])
    with op.batch_alter_table("training_steps", schema=None) as batch_op:
        batch_op.add_column(sa.Column("checkpoint", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    # In place on SQLite (>= 3.35): a copy of `runs` would cascade its turns away (0011).
    with op.batch_alter_table("training_steps", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("checkpoint")
    with op.batch_alter_table("runs", schema=None, recreate="never") as batch_op:
        batch_op.drop_index("ix_runs_policy_job_id")
        batch_op.drop_column("policy_job_id")
        batch_op.drop_column("policy")
