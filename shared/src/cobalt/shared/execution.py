"""Running a candidate program on a problem's stored tests through the executor.

A problem's tests are kept in the executor's own format (`StoredTest`), except that a
`ProgramTest` (a checking program, e.g. part of HumanEval's `check`) changes the program
itself: it runs the candidate followed by the checking code. So one program on one test
list becomes one or more executor requests: all stdin/call tests in one request, each
program test in a request of its own. `merge_responses` puts the verdicts back in test
order, so "the first failing public test" means the first in the dataset's order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cobalt.shared.clients import AsyncExecutorClient
from cobalt.shared.contracts import (
    PROGRAM_TEST_MARKER,
    BatchExecuteRequest,
    Compare,
    ExecuteRequest,
    ExecuteResponse,
    Limits,
    ProgramTest,
    StdinTest,
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


def _checked_program(code: str, test: ProgramTest) -> str:
    return f"{code}\n\n{test.check}\nprint({PROGRAM_TEST_MARKER!r})\n"


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
    plain = [(i, t) for i, t in enumerate(tests) if not isinstance(t, ProgramTest)]
    planned: list[PlannedRequest] = []
    if plain:
        planned.append(
            PlannedRequest(
                ExecuteRequest(
                    code=code, tests=[t for _, t in plain], compare=compare, limits=limits
                ),
                tuple(i for i, _ in plain),
            )
        )
    for index, test in enumerate(tests):
        if isinstance(test, ProgramTest):
            planned.append(
                PlannedRequest(
                    ExecuteRequest(
                        code=_checked_program(code, test),
                        tests=[StdinTest(stdin="", expected_stdout=PROGRAM_TEST_MARKER)],
                        compare=compare,
                        limits=limits,
                    ),
                    (index,),
                )
            )
    return planned


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
