"""Running a candidate program on a problem's stored tests through the executor.

A problem's tests are kept in the executor's own format (`StoredTest`): stdin, call and
program tests (a checking program, e.g. HumanEval's `check`, which the executor runs in a
process of its own that calls the candidate). So one program on one test list is one
executor request, its verdicts in the dataset's order ("the first failing public test"
is the first in that order). `merge_responses` puts the verdicts of planned requests
back in test order.

Infrastructure errors are not verdicts on the program (docs/executor.md's promise): a
program whose results include `sandbox_error`, or whose executor call failed, is re-run up
to `retries` times by `judge_programs`; one that still fails is reported as `unjudged`, so
callers mask it (training) or count it apart (evaluation) instead of scoring it as failed.
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
from cobalt.shared.errors import Overloaded, Unavailable, UpstreamError

__all__ = [
    "JUDGE_RETRIES",
    "JudgedPrograms",
    "PlannedRequest",
    "execute_programs",
    "judge_programs",
    "merge_responses",
    "plan_requests",
    "unjudged_verdicts",
]

JUDGE_RETRIES = 2
"""Re-runs of a program the sandbox failed to judge before it is given up on (masked)."""

INFRASTRUCTURE_ERRORS = (Overloaded, Unavailable, UpstreamError)
"""An executor call that failed with these judged nothing (a bad request is a bug: raised)."""


def unjudged_verdicts(verdicts: Sequence[str]) -> bool:
    """Whether a verdict list holds a test the sandbox failed to run (not the program's fault)."""
    return Verdict.SANDBOX_ERROR.value in verdicts


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


@dataclass(frozen=True, slots=True)
class JudgedPrograms:
    """`execute_programs`' answer after retries: the judged programs' responses by index,
    and the indices the sandbox never judged (a `sandbox_error` left, or every call failed)."""

    responses: dict[int, ExecuteResponse]
    unjudged: frozenset[int]
    retried: int
    """Programs re-run at least once (judged in the end or not)."""


async def judge_programs(
    executor: AsyncExecutorClient,
    programs: Sequence[str | None],
    tests: Sequence[StoredTest],
    *,
    limits: Limits | None = None,
    compare: Compare = Compare.COBALT,
    retries: int = JUDGE_RETRIES,
) -> JudgedPrograms:
    """`execute_programs`, re-running (up to `retries` times) each program the sandbox
    failed to judge; those still unjudged are in `unjudged`, without a response.

    Raises:
        CobaltError: an executor error that is not an infrastructure failure (a bad request).
    """
    if retries < 0:
        raise ValueError(f"retries must be 0 or more, got {retries}")
    responses: dict[int, ExecuteResponse] = {}
    pending = [i for i, program in enumerate(programs) if program is not None and tests]
    retried: set[int] = set()
    for attempt in range(retries + 1):
        if not pending:
            break
        if attempt:
            retried.update(pending)
        try:
            answered = await execute_programs(
                executor, [programs[i] for i in pending], tests, limits=limits, compare=compare
            )
        except INFRASTRUCTURE_ERRORS:
            continue  # the whole call judged nothing: every pending program is tried again
        still = []
        for k, i in enumerate(pending):
            response = answered[k]
            if any(r.verdict == Verdict.SANDBOX_ERROR for r in response.results):
                still.append(i)
            else:
                responses[i] = response
        pending = still
    return JudgedPrograms(responses, frozenset(pending), len(retried))
