"""Bandit datasets and their contexts (the contextual-bandit builder).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22 17:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

ContextId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "bandit_datasets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("source_run_id", sa.Integer(), nullable=False),
        sa.Column("split", sa.String(length=20), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("counts", sa.JSON(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["source_run_id"],
            ["runs.id"],
            name=op.f("fk_bandit_datasets_source_run_id_runs"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bandit_datasets")),
        sa.UniqueConstraint("name", name=op.f("uq_bandit_datasets_name")),
    )
    with op.batch_alter_table("bandit_datasets") as batch_op:
        batch_op.create_index(
            batch_op.f("ix_bandit_datasets_source_run_id"), ["source_run_id"], unique=False
        )
    op.create_table(
        "bandit_contexts",
        sa.Column("id", ContextId, nullable=False),
        sa.Column("bandit_dataset_id", sa.Integer(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("source_run_id", sa.Integer(), nullable=False),
        sa.Column("trajectory_id", sa.Integer(), nullable=True),
        sa.Column("assistant_turns", sa.Integer(), nullable=False),
        sa.Column("messages", sa.JSON(), nullable=False),
        sa.Column("prev_best", sa.Float(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("template_sha256", sa.String(length=64), nullable=False),
        sa.Column("mixed_from_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["bandit_dataset_id"],
            ["bandit_datasets.id"],
            name=op.f("fk_bandit_contexts_bandit_dataset_id_bandit_datasets"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["problem_id"],
            ["problems.id"],
            name=op.f("fk_bandit_contexts_problem_id_problems"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_bandit_contexts")),
        sa.UniqueConstraint(
            "bandit_dataset_id",
            "position",
            name=op.f("uq_bandit_contexts_bandit_dataset_id_position"),
        ),
    )
    with op.batch_alter_table("bandit_contexts") as batch_op:
        batch_op.create_index(
            batch_op.f("ix_bandit_contexts_problem_id"), ["problem_id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("bandit_contexts") as batch_op:
        batch_op.drop_index(batch_op.f("ix_bandit_contexts_problem_id"))
    op.drop_table("bandit_contexts")
    with op.batch_alter_table("bandit_datasets") as batch_op:
        batch_op.drop_index(batch_op.f("ix_bandit_datasets_source_run_id"))
    op.drop_table("bandit_datasets")
