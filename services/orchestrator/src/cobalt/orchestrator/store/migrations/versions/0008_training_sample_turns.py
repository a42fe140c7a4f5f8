"""Multi-turn training episodes: a ledger sample is one assistant turn of an episode.

A `multi-turn` job's group holds n episodes of up to t turns; every turn's response is its
own row (its own prompt and sampled ids), keyed by (group, episode = sample_index, turn).
Single-turn and Cobalt groups keep turn 0 only.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23 23:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("training_samples", schema=None) as batch_op:
        batch_op.add_column(sa.Column("turn", sa.Integer(), nullable=False, server_default="0"))
        batch_op.drop_constraint(
            batch_op.f("uq_training_samples_group_id_sample_index"), type_="unique"
        )
        batch_op.create_unique_constraint(
            batch_op.f("uq_training_samples_group_id_sample_index_turn"),
            ["group_id", "sample_index", "turn"],
        )


def downgrade() -> None:
    # Later turns have no place in the old key; the episode's turn 0 stays.
    op.execute("DELETE FROM training_samples WHERE turn > 0")
    with op.batch_alter_table("training_samples", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("uq_training_samples_group_id_sample_index_turn"), type_="unique"
        )
        batch_op.create_unique_constraint(
            batch_op.f("uq_training_samples_group_id_sample_index"), ["group_id", "sample_index"]
        )
        batch_op.drop_column("turn")
