"""Per-test outputs on turns: what the program printed and its error, per public and
hidden test, as the executor returned them (capped by its `stream_chars`), so a verdict
can be shown with the test's input, expected output, actual output and error.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.add_column(sa.Column("public_outputs", sa.JSON(none_as_null=True), nullable=True))
        batch_op.add_column(sa.Column("hidden_outputs", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("turns", schema=None) as batch_op:
        batch_op.drop_column("hidden_outputs")
        batch_op.drop_column("public_outputs")
