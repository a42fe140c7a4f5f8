"""Checking generated problems: every reference solution against its own tests, on the
executor the runs use, many problems per request.

The expected values were computed by running the reference here; running it again in
the sandbox, judged the way runs judge (`cobalt` preset, values through JSON), catches
what differs between the two: a value JSON cannot carry, a reference that needs
something the sandbox lacks, a test the judge reads otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from cobalt.shared.contracts import (
    BatchExecuteRequest,
    BatchExecuteResponse,
    Compare,
    ExecuteRequest,
    ProblemRow,
)
from cobalt.shared.contracts.executor import MAX_BATCH_REQUESTS

__all__ = ["BatchExecutor", "check_references"]

REFERENCE_KEY = "reference"
"""Where a generated row keeps its reference solution (`source_metadata`)."""


class BatchExecutor(Protocol):
    """What checking needs: the executor client's `execute_batch`."""

    def execute_batch(self, batch: BatchExecuteRequest) -> BatchExecuteResponse: ...


def check_references(
    rows: Sequence[ProblemRow], executor: BatchExecutor, *, compare: Compare = Compare.COBALT
) -> dict[str, str]:
    """Run each row's reference on its public and hidden tests.

    Returns:
        external id -> why it failed, for every row whose reference did not pass all of
        its tests (empty when all pass).
    """
    failures: dict[str, str] = {}
    for start in range(0, len(rows), MAX_BATCH_REQUESTS):
        chunk = rows[start : start + MAX_BATCH_REQUESTS]
        requests = [
            ExecuteRequest(
                code=str(row.source_metadata.get(REFERENCE_KEY, "")),
                tests=[*row.public_tests, *row.hidden_tests],
                compare=compare,
            )
            for row in chunk
        ]
        response = executor.execute_batch(BatchExecuteRequest(requests=requests))
        for row, result in zip(chunk, response.results, strict=True):
            if result.passed == result.total:
                continue
            first = next(r for r in result.results if r.verdict != "accepted")
            failures[row.external_id] = (
                f"the reference passes {result.passed} of {result.total} tests; first "
                f"failure: {first.verdict}: {first.feedback or first.stderr}".strip()
            )
    return failures
