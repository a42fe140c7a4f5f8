"""The largest values the store can hold, as limits request contracts declare.

A request field that ends up in a database column is bounded here, at the edge, so a
value the store cannot hold is a 422 that names the field (and the OpenAPI document
states the same limit) instead of a database error halfway through a request.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

__all__ = [
    "DATASET_NAME_CHARS",
    "INT32_MAX",
    "MODEL_NAME_CHARS",
    "PROBLEM_ID_CHARS",
    "SEED_MAX",
    "TEMPLATE_NAME_CHARS",
    "URL_CHARS",
    "Count",
    "RowId",
]

INT32_MAX = 2**31 - 1
"""PostgreSQL's `integer`: every id, count, index and step column."""
SEED_MAX = 2**63 - 1
"""Sampling seeds are passed to the model server, which reads them as 64-bit integers."""

DATASET_NAME_CHARS = 200
"""datasets.name, bandit_datasets.name, training_jobs.name."""
PROBLEM_ID_CHARS = 300
"""problems.external_id."""
MODEL_NAME_CHARS = 200
"""runs.model, turns.model: the served model's name."""
TEMPLATE_NAME_CHARS = 200
"""runs.template_name."""
URL_CHARS = 500
"""runs.base_url, training_jobs.model (a directory)."""

RowId = Annotated[int, Field(ge=1, le=INT32_MAX)]
"""A stored row's id."""
Count = Annotated[int, Field(ge=0, le=INT32_MAX)]
"""A count, index, step or version stored in an `integer` column."""
