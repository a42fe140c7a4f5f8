"""Running a candidate program on a problem's stored tests through the executor.

A problem's tests are kept in the executor's own format (`StoredTest`): stdin, call and
program tests (a checking program, e.g. HumanEval's `check`, which the executor runs in a
process of its own that calls the candidate). So one program on one test list is one
executor request, its verdicts in the dataset's order ("the first failing public test"
is the first in that order). `merge_responses` puts the verdicts of planned requests
back in test order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cobalt.shared.clients import AsyncExecutorClient
from cobalt.shared.contracts import (
    BatchExecuteRequest,
    Compare,
    ExecuteRequest,
    ExecuteResponse,
    Limits,
    StoredTest,
    TestResult,
    Verdict,
    reference_limits,
)

__all__ = ["PlannedRequest", "execute_programs", "merge_responses", "plan_requests"]


@dataclass(frozen=True, slots=True)
class PlannedRequest:
    """One executor request and the positions (in the stored test list) of its tests."""

    request: ExecuteRequest
    positions: tuple[int, ...]


def plan_requests(
    code: str,
    tests: Sequence[StoredTest],
    *,
    limits: Limits | None = None,
    compare: Compare = Compare.COBALT,
) -> list[PlannedRequest]:
    """The executor requests that run `code` on every test in `tests` (at least one).

    Without `limits`, the judge preset's reference limits (`reference_limits`).
    """
    if not tests:
        raise ValueError("a program needs at least one test to run on")
    limits = limits or reference_limits(compare)
    request = ExecuteRequest(code=code, tests=list(tests), compare=compare, limits=limits)
    return [PlannedRequest(request, tuple(range(len(tests))))]


def merge_responses(
    planned: Sequence[PlannedRequest], responses: Sequence[ExecuteResponse]
) -> ExecuteResponse:
    """One response with every test's result at its stored position."""
    if len(planned) != len(responses):
        raise ValueError(f"{len(planned)} requests planned, {len(responses)} responses")
    total = sum(len(p.positions) for p in planned)
    results: list[TestResult | None] = [None] * total
    for plan, response in zip(planned, responses, strict=True):
        if len(response.results) != len(plan.positions):
            raise ValueError("a response does not have one result per planned test")
        for position, result in zip(plan.positions, response.results, strict=True):
            results[position] = result
    ordered = [r for r in results if r is not None]
    if len(ordered) != total:
        raise ValueError("planned positions do not cover every test exactly once")
    passed = sum(1 for r in ordered if r.verdict == Verdict.ACCEPTED)
    return ExecuteResponse(
        results=ordered,
        passed=passed,
        total=total,
        pass_rate=passed / total,
        executor_version=responses[0].executor_version,
    )


async def execute_programs(
    executor: AsyncExecutorClient,
    programs: Sequence[str | None],
    tests: Sequence[StoredTest],
    *,
    limits: Limits | None = None,
    compare: Compare = Compare.COBALT,
) -> dict[int, ExecuteResponse]:
    """Run every program on `tests` in one batch call; each one's merged response by index.

    Programs that are None (no code block) and an empty test list run nothing and have no
    entry.
    """
    plans = {
        i: plan_requests(program, tests, limits=limits, compare=compare)
        for i, program in enumerate(programs)
        if program is not None and tests
    }
    requests = [plan.request for planned in plans.values() for plan in planned]
    if not requests:
        return {}
    responses = (await executor.execute_batch(BatchExecuteRequest(requests=requests))).results
    merged: dict[int, ExecuteResponse] = {}
    cursor = 0
    for i, planned in plans.items():
        merged[i] = merge_responses(planned, responses[cursor : cursor + len(planned)])
        cursor += len(planned)
    return merged
