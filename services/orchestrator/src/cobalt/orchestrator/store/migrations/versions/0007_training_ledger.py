"""Training jobs, their steps and the sample ledger: groups (claimed by steps exactly once)
and samples with their token ids, log-probabilities, verdicts and every reward component.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 21:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "training_jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("mode", sa.String(length=20), nullable=False),
        sa.Column("bandit_dataset_id", sa.Integer(), nullable=True),
        sa.Column("model", sa.String(length=500), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["bandit_dataset_id"],
            ["bandit_datasets.id"],
            name=op.f("fk_training_jobs_bandit_dataset_id_bandit_datasets"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_training_jobs")),
        sa.UniqueConstraint("name", name=op.f("uq_training_jobs_name")),
    )
    with op.batch_alter_table("training_jobs", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_training_jobs_bandit_dataset_id"), ["bandit_dataset_id"], unique=False
        )

    op.create_table(
        "training_groups",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("context_key", sa.String(length=100), nullable=False),
        sa.Column("round", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("step", sa.Integer(), nullable=True),
        sa.Column("phase_seconds", sa.JSON(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["training_jobs.id"],
            name=op.f("fk_training_groups_job_id_training_jobs"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["problem_id"],
            ["problems.id"],
            name=op.f("fk_training_groups_problem_id_problems"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_training_groups")),
        sa.UniqueConstraint(
            "job_id",
            "context_key",
            "round",
            name=op.f("uq_training_groups_job_id_context_key_round"),
        ),
    )
    op.create_table(
        "training_steps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["training_jobs.id"],
            name=op.f("fk_training_steps_job_id_training_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_training_steps")),
        sa.UniqueConstraint("job_id", "step", name=op.f("uq_training_steps_job_id_step")),
    )
    op.create_table(
        "training_samples",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("group_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("response", sa.Text(), nullable=False),
        sa.Column("prompt_token_ids", sa.LargeBinary(), nullable=False),
        sa.Column("response_token_ids", sa.LargeBinary(), nullable=False),
        sa.Column("response_logprobs", sa.LargeBinary(), nullable=False),
        sa.Column("verdicts", sa.JSON(), nullable=False),
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
            ["group_id"],
            ["training_groups.id"],
            name=op.f("fk_training_samples_group_id_training_groups"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_training_samples")),
        sa.UniqueConstraint(
            "group_id", "sample_index", name=op.f("uq_training_samples_group_id_sample_index")
        ),
    )


def downgrade() -> None:
    op.drop_table("training_samples")
    op.drop_table("training_steps")
    op.drop_table("training_groups")
    with op.batch_alter_table("training_jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_training_jobs_bandit_dataset_id"))

    op.drop_table("training_jobs")
