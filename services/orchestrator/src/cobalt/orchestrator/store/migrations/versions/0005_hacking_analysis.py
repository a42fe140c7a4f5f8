"""Reward-hacking cases and the judges' verdicts.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22 18:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "hacking_cases",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("turn_index", sa.Integer(), nullable=False),
        sa.Column("shown_test", sa.Integer(), nullable=False),
        sa.Column("swapped_tests", sa.JSON(), nullable=False),
        sa.Column("previous_code", sa.Text(), nullable=False),
        sa.Column("feedback", sa.Text(), nullable=False),
        sa.Column("new_code", sa.Text(), nullable=False),
        sa.Column("diff", sa.Text(), nullable=False),
        sa.Column("hidden_pass_before", sa.Float(), nullable=True),
        sa.Column("hidden_pass_after", sa.Float(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["problem_id"],
            ["problems.id"],
            name=op.f("fk_hacking_cases_problem_id_problems"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_hacking_cases_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_hacking_cases")),
        sa.UniqueConstraint(
            "run_id",
            "problem_id",
            "sample_index",
            "turn_index",
            name=op.f("uq_hacking_cases_run_id_problem_id_sample_index_turn_index"),
        ),
    )
    with op.batch_alter_table("hacking_cases") as batch_op:
        batch_op.create_index(
            batch_op.f("ix_hacking_cases_problem_id"), ["problem_id"], unique=False
        )
    op.create_table(
        "judge_verdicts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("case_id", sa.Integer(), nullable=False),
        sa.Column("judge_model", sa.String(length=200), nullable=False),
        sa.Column("category", sa.String(length=20), nullable=False),
        sa.Column("raw_answer", sa.Text(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["case_id"],
            ["hacking_cases.id"],
            name=op.f("fk_judge_verdicts_case_id_hacking_cases"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_verdicts")),
        sa.UniqueConstraint(
            "case_id", "judge_model", name=op.f("uq_judge_verdicts_case_id_judge_model")
        ),
    )


def downgrade() -> None:
    op.drop_table("judge_verdicts")
    with op.batch_alter_table("hacking_cases") as batch_op:
        batch_op.drop_index(batch_op.f("ix_hacking_cases_problem_id"))
    op.drop_table("hacking_cases")
