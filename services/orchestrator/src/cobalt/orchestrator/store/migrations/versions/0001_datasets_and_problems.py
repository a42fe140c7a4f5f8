"""Datasets and problems: the store the importers fill.

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-22 08:26:47.449087
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("source", sa.String(length=50), nullable=False),
        sa.Column("variant", sa.String(length=50), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column(
            "provenance",
            sa.JSON(),
            nullable=False,
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["datasets.id"],
            name=op.f("fk_datasets_parent_id_datasets"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_datasets")),
        sa.UniqueConstraint("name", name=op.f("uq_datasets_name")),
    )
    op.create_table(
        "problems",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("dataset_id", sa.Integer(), nullable=False),
        sa.Column("external_id", sa.String(length=300), nullable=False),
        sa.Column("statement", sa.Text(), nullable=False),
        sa.Column("starter_code", sa.Text(), nullable=False),
        sa.Column("test_style", sa.String(length=10), nullable=False),
        sa.Column("fn_name", sa.String(length=200), nullable=True),
        sa.Column(
            "public_tests",
            sa.JSON(),
            nullable=False,
        ),
        sa.Column(
            "hidden_tests",
            sa.JSON(),
            nullable=False,
        ),
        sa.Column("difficulty", sa.String(length=50), nullable=True),
        sa.Column(
            "source_metadata",
            sa.JSON(),
            nullable=False,
        ),
        sa.Column(
            "perturbation",
            sa.JSON(),
            nullable=True,
        ),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_problems_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_problems")),
        sa.UniqueConstraint(
            "dataset_id", "external_id", name=op.f("uq_problems_dataset_id_external_id")
        ),
    )
    with op.batch_alter_table("problems", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_problems_dataset_id"), ["dataset_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("problems", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_problems_dataset_id"))

    op.drop_table("problems")
    op.drop_table("datasets")
