"""Full-text search: a GIN index on the English tsvector of problem statements
(PostgreSQL only; SQLite searches with LIKE and gets no index).

The expression is exactly the one `datasets.search` queries, which is what lets the
planner use it. Turns' responses get no such index: on the turn-writing hot path it cut
batched writes from 13,700 to 2,600 rows/s (bench/turn_writes.py), so response search
computes the tsvector at query time, narrowed by run when one is given.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

INDEXES = {
    "ix_problems_statement_fts": ("problems", "statement"),
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, (table, column) in INDEXES.items():
        op.create_index(
            name,
            table,
            [sa.text(f"to_tsvector('english'::regconfig, {column})")],
            postgresql_using="gin",
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, (table, _) in INDEXES.items():
        op.drop_index(name, table_name=table)
