"""The project's own row format: one `ProblemRow` per line (docs/schemas/problem.schema.json)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from cobalt.orchestrator.datasets.importing import ImportOptions, validation_reason
from cobalt.orchestrator.datasets.records import BadRow, read_records
from cobalt.shared.contracts import ProblemRow

__all__ = ["read_problems"]


def read_problems(path: Path, options: ImportOptions) -> Iterator[ProblemRow | BadRow]:
    for number, record in read_records(path):
        if isinstance(record, BadRow):
            yield record
            continue
        try:
            yield ProblemRow.model_validate(record)
        except ValidationError as exc:
            yield BadRow(number, validation_reason(exc), external_id=record.get("external_id"))
