"""Runs, trajectories and turns: the rollout store.

A run samples trajectories (problem x sample index) of one dataset; each trajectory is a
chain of turns. The turns' unique key (run, problem, sample, turn) is what makes a retried
rollout job write no duplicate.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 12:10:21.967303
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from cobalt.orchestrator.store.db import compress_columns_with_lz4

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

LARGE_TURN_COLUMNS = (
    "messages",
    "raw_response",
    "stored_response",
    "code",
    "prompt_token_ids",
    "completion_token_ids",
    "completion_logprobs",
)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=20), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("parent_run_id", sa.Integer(), nullable=True),
        sa.Column("base_url", sa.String(length=500), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("template_name", sa.String(length=200), nullable=False),
        sa.Column("template_sha256", sa.String(length=64), nullable=False),
        sa.Column("total_trajectories", sa.Integer(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_runs_dataset_id_datasets"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["parent_run_id"],
            ["runs.id"],
            name=op.f("fk_runs_parent_run_id_runs"),
            ondelete="RESTRICT",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_dataset_id"), ["dataset_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_parent_run_id"), ["parent_run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_status"), ["status"], unique=False)

    op.create_table(
        "trajectories",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=20), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("turns_done", sa.Integer(), nullable=False),
        sa.Column(
            "updated_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["problem_id"],
            ["problems.id"],
            name=op.f("fk_trajectories_problem_id_problems"),
            ondelete="RESTRICT",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_trajectories_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_trajectories")),
        sa.UniqueConstraint(
            "run_id",
            "problem_id",
            "sample_index",
            name=op.f("uq_trajectories_run_id_problem_id_sample_index"),
        ),
    )
    with op.batch_alter_table("trajectories", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_trajectories_problem_id"), ["problem_id"], unique=False
        )

    op.create_table(
        "turns",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("trajectory_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("sample_index", sa.Integer(), nullable=False),
        sa.Column("turn_index", sa.Integer(), nullable=False),
        sa.Column("messages", sa.JSON(), nullable=False),
        sa.Column("raw_response", sa.Text(), nullable=False),
        sa.Column("stored_response", sa.Text(), nullable=False),
        sa.Column("code", sa.Text(), nullable=True),
        sa.Column("public_verdicts", sa.JSON(), nullable=False),
        sa.Column("public_passed", sa.Boolean(), nullable=False),
        sa.Column("feedback", sa.Text(), nullable=False),
        sa.Column("finish_reason", sa.String(length=50), nullable=True),
        sa.Column("prompt_token_ids", sa.JSON(), nullable=True),
        sa.Column("completion_token_ids", sa.JSON(), nullable=True),
        sa.Column("completion_logprobs", sa.JSON(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("model_latency_ms", sa.Float(), nullable=False),
        sa.Column("exec_latency_ms", sa.Float(), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=True),
        sa.Column("hidden_verdicts", sa.JSON(), nullable=True),
        sa.Column("hidden_passed", sa.Boolean(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["trajectory_id"],
            ["trajectories.id"],
            name=op.f("fk_turns_trajectory_id_trajectories"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_turns")),
        sa.UniqueConstraint(
            "run_id",
            "problem_id",
            "sample_index",
            "turn_index",
            name=op.f("uq_turns_run_id_problem_id_sample_index_turn_index"),
        ),
    )
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_turns_trajectory_id"), ["trajectory_id"], unique=False)

    compress_columns_with_lz4(op.get_bind(), "turns", LARGE_TURN_COLUMNS)


def downgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_turns_trajectory_id"))

    op.drop_table("turns")
    with op.batch_alter_table("trajectories", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_trajectories_problem_id"))

    op.drop_table("trajectories")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_status"))
        batch_op.drop_index(batch_op.f("ix_runs_parent_run_id"))
        batch_op.drop_index(batch_op.f("ix_runs_dataset_id"))

    op.drop_table("runs")
