"""A training job's params JSON names its mode, so the column's type alone reads it as
that mode's model (`store.model_json.TrainingParamsJson`): each row's `mode` column is
copied into its params (the column stays: it is filtered on). Downgrade removes it again.

Row by row in Python, so the same code runs on PostgreSQL and SQLite; the JSON is
otherwise left as it was (settings of other modes, from rows written before the per-mode
models, are still dropped on read).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06 12:30:00
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_JOBS = sa.table(
    "training_jobs",
    sa.column("id", sa.Integer),
    sa.column("mode", sa.String),
    sa.column("params", sa.JSON),
)


def _rewrite(change: Callable[[dict[str, Any], str], dict[str, Any]]) -> None:
    """Each job's params, rewritten by `change(params, mode)`."""
    bind = op.get_bind()
    rows = bind.execute(sa.select(_JOBS.c.id, _JOBS.c.mode, _JOBS.c.params)).all()
    for job_id, mode, params in rows:
        bind.execute(
            _JOBS.update()
            .where(_JOBS.c.id == job_id)
            .values(params=change(dict(params or {}), mode))
        )


def upgrade() -> None:
    _rewrite(lambda params, mode: {**params, "mode": mode})


def downgrade() -> None:
    _rewrite(lambda params, mode: {k: v for k, v in params.items() if k != "mode"})
