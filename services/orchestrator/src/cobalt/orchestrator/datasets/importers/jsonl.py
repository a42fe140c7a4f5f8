"""The project's own row format: one `ProblemRow` per line (docs/schemas/problem.schema.json)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cobalt.orchestrator.datasets.importing import ImportOptions, validation_reason
from cobalt.orchestrator.datasets.records import BadRow, read_records
from cobalt.shared.contracts import ProblemRow

__all__ = ["read_problems"]


EXPORT_ONLY_COLUMNS = ("dataset", "perturbation")
"""Columns `cobalt data export` adds that are not part of a problem row."""
JSON_TEXT_COLUMNS = ("public_tests", "hidden_tests", "source_metadata")
"""Columns a Parquet export stores as JSON text (to keep its schema flat)."""


def _from_export(record: dict[str, Any]) -> dict[str, Any]:
    """Accept rows of our own Parquet exports too: JSON-text columns, extra columns."""
    row = {k: v for k, v in record.items() if k not in EXPORT_ONLY_COLUMNS}
    for column in JSON_TEXT_COLUMNS:
        if isinstance(row.get(column), str):
            row[column] = json.loads(row[column])
    return row


def read_problems(path: Path, options: ImportOptions) -> Iterator[ProblemRow | BadRow]:
    for number, record in read_records(path):
        if isinstance(record, BadRow):
            yield record
            continue
        external_id = record.get("external_id")
        try:
            row = _from_export(record)
        except ValueError as exc:
            yield BadRow(number, f"a JSON-text column is not valid JSON: {exc}", external_id)
            continue
        try:
            yield ProblemRow.model_validate(row)
        except ValidationError as exc:
            yield BadRow(number, validation_reason(exc), external_id=external_id)
