"""Turns keep token ids and logprobs as packed binary arrays instead of JSON, and
PostgreSQL keeps a compressed turn row in its page when it fits.

See `cobalt.orchestrator.store.packed` for the layout and why. Existing rows are
converted in Python, in batches, in both directions, so an upgrade loses nothing and a
downgrade gives back the JSON the rows had.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22 16:40:00
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

from cobalt.orchestrator.store.db import compress_columns_with_lz4
from cobalt.orchestrator.store.packed import (
    pack_float64,
    pack_int32,
    unpack_float64,
    unpack_int32,
)

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

# column -> (pack, unpack)
ARRAY_COLUMNS: dict[str, tuple[Callable[[Any], bytes], Callable[[bytes], list[Any]]]] = {
    "prompt_token_ids": (pack_int32, unpack_int32),
    "completion_token_ids": (pack_int32, unpack_int32),
    "completion_logprobs": (pack_float64, unpack_float64),
}
BATCH_ROWS = 2000


def _convert(
    old_type: sa.types.TypeEngine[Any],
    new_type: sa.types.TypeEngine[Any],
    convert: Callable[[tuple[str, Any]], Any],
) -> None:
    """Replace each array column by one of `new_type`, converting every stored value."""
    bind = op.get_bind()
    with op.batch_alter_table("turns") as batch_op:
        for column in ARRAY_COLUMNS:
            batch_op.add_column(sa.Column(f"{column}_new", new_type, nullable=True))
    turns = sa.table(
        "turns",
        sa.column("id", sa.BigInteger()),
        *(sa.column(c, old_type) for c in ARRAY_COLUMNS),
        *(sa.column(f"{c}_new", new_type) for c in ARRAY_COLUMNS),
    )
    last_id = -1
    while True:
        rows = bind.execute(
            sa.select(turns.c.id, *(turns.c[c] for c in ARRAY_COLUMNS))
            .where(turns.c.id > last_id)
            .order_by(turns.c.id)
            .limit(BATCH_ROWS)
        ).all()
        if not rows:
            break
        for row in rows:
            values = {
                f"{column}_new": None if row[i + 1] is None else convert((column, row[i + 1]))
                for i, column in enumerate(ARRAY_COLUMNS)
            }
            bind.execute(sa.update(turns).where(turns.c.id == row[0]).values(**values))
        last_id = rows[-1][0]
    with op.batch_alter_table("turns") as batch_op:
        for column in ARRAY_COLUMNS:
            batch_op.drop_column(column)
            batch_op.alter_column(f"{column}_new", new_column_name=column)
    # The new columns start with the server's default compression; keep 0002's choice.
    compress_columns_with_lz4(bind, "turns", list(ARRAY_COLUMNS))


def _pack(item: tuple[str, Any]) -> bytes:
    column, value = item
    listed = json.loads(value) if isinstance(value, str) else value
    return ARRAY_COLUMNS[column][0](listed)


def _unpack(item: tuple[str, Any]) -> list[Any]:
    column, value = item
    return ARRAY_COLUMNS[column][1](bytes(value))


TOAST_TUPLE_TARGET = 8160
"""Bytes a turn row may take before PostgreSQL moves columns out of line (default 2032).

A turn row is several KB. At the default target PostgreSQL moved its responses and
arrays into the TOAST table, one extra heap and index insert per value; with the page-size
target a row that fits once compressed stays in the heap. bench/turn_writes.py: +20 %
turn rows per second. Larger rows are still moved out of line as before.
"""


def upgrade() -> None:
    _convert(sa.JSON(), sa.LargeBinary(), _pack)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE turns SET (toast_tuple_target = {TOAST_TUPLE_TARGET})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE turns RESET (toast_tuple_target)")
    _convert(sa.LargeBinary(), sa.JSON(), _unpack)
