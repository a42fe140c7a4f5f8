"""Every component of the Cobalt reward of each evaluated turn (runs/rewards.py).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 20:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "turn_rewards",
        sa.Column("turn_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("turn_index", sa.Integer(), nullable=False),
        sa.Column("tokenizer", sa.String(length=500), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("total", sa.Float(), nullable=False),
        sa.Column("total_before_clip", sa.Float(), nullable=False),
        sa.Column("validation_reward", sa.Float(), nullable=False),
        sa.Column("pass_rate", sa.Float(), nullable=False),
        sa.Column("prev_best", sa.Float(), nullable=False),
        sa.Column("tests_passed", sa.Integer(), nullable=False),
        sa.Column("tests_total", sa.Integer(), nullable=False),
        sa.Column("no_code", sa.Boolean(), nullable=False),
        sa.Column("correctness", sa.Float(), nullable=True),
        sa.Column("improvement", sa.Float(), nullable=True),
        sa.Column("improvement_rule", sa.String(length=20), nullable=True),
        sa.Column("before_format", sa.Float(), nullable=True),
        sa.Column("format", sa.Float(), nullable=True),
        sa.Column("format_violations", sa.JSON(), nullable=False),
        sa.Column("think_close_count", sa.Integer(), nullable=True),
        sa.Column("python_fence_ok", sa.Boolean(), nullable=True),
        sa.Column("backticks_in_code", sa.Boolean(), nullable=True),
        sa.Column("repeated_block", sa.Boolean(), nullable=True),
        sa.Column("think_tokens", sa.Integer(), nullable=True),
        sa.Column("answer_tokens", sa.Integer(), nullable=True),
        sa.Column("after_code_tokens", sa.Integer(), nullable=True),
        sa.Column("reflection_keywords", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_turn_rewards_run_id_runs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["turn_id"],
            ["turns.id"],
            name=op.f("fk_turn_rewards_turn_id_turns"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("turn_id", name=op.f("pk_turn_rewards")),
    )
    with op.batch_alter_table("turn_rewards", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_turn_rewards_run_id"), ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("turn_rewards", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_turn_rewards_run_id"))

    op.drop_table("turn_rewards")
