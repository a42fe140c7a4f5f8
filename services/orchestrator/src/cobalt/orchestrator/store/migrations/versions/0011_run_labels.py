"""Run names, tags and notes: what a researcher calls a run ("baseline", "after 200
steps"), free tags to find runs by, and notes on what was tried. All optional; a run
without a name is shown by its id.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-28 00:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("name", sa.String(200), nullable=True))
        batch_op.add_column(
            sa.Column("tags", sa.JSON(none_as_null=True), nullable=False, server_default="[]")
        )
        batch_op.add_column(sa.Column("notes", sa.Text(), nullable=True))


def downgrade() -> None:
    # Never a copy of the table on SQLite: dropping `runs` to rename its copy would cascade
    # to every trajectory and turn of every run. SQLite >= 3.35 drops a column in place.
    with op.batch_alter_table("runs", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("notes")
        batch_op.drop_column("tags")
        batch_op.drop_column("name")
