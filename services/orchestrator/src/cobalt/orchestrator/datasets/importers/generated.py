"""Generated problems (`cobalt.orchestrator.datasets.generated`): the file is a spec.

Input: a JSON object, the `GenerationSpec` (family, split, seed, count, difficulty,
templates), e.g. `{"split": "train", "seed": 1, "count": 200}`. The problems are drawn
from it deterministically, so importing the same spec again changes nothing. With
`verify` (the default of `cobalt data generate`), every reference solution runs against
its own tests on the executor, many problems per request, and a problem whose reference
fails is a `BadRow` naming the failure (none should: that is a bug in a template).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from cobalt.orchestrator.datasets.generated.checking import check_references
from cobalt.orchestrator.datasets.generated.instances import GenerationSpec, generate_problems
from cobalt.orchestrator.datasets.importing import ImportOptions
from cobalt.orchestrator.datasets.records import BadRow
from cobalt.shared.contracts import ProblemRow
from cobalt.shared.errors import InvalidInput, first_validation_error

__all__ = ["read_problems", "read_spec"]


def read_spec(path: Path) -> GenerationSpec:
    """The spec in `path`.

    Raises:
        InvalidInput: not a JSON object, or not a valid spec.
    """
    try:
        return GenerationSpec.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except ValueError as exc:  # ValidationError is one
        reason = (
            first_validation_error(exc, where="spec")
            if isinstance(exc, ValidationError)
            else f"not valid JSON: {exc}"
        )
        raise InvalidInput(f"{path.name} is not a generation spec: {reason}") from exc


def read_problems(path: Path, options: ImportOptions) -> Iterator[ProblemRow | BadRow]:
    spec = read_spec(path)
    try:
        rows = list(generate_problems(spec))
    except ValueError as exc:
        raise InvalidInput(str(exc)) from exc
    failures: dict[str, str] = {}
    if options.verify:
        if options.executor is None:
            raise InvalidInput("verifying generated problems needs an executor")
        failures = check_references(rows, options.executor)
    for number, row in enumerate(rows, start=1):
        if row.external_id in failures:
            yield BadRow(number, failures[row.external_id], row.external_id)
        else:
            yield row
