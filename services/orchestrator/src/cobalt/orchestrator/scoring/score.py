"""Score a response as training does: extract its program, run it on every test, reward it.

For anyone who has a response and a test list (`cobalt reward score`, checks by hand,
evaluation scripts): the program is `cobalt.shared.extraction.extract_program`'s, the
tests run through the executor the way rollouts run them (`plan_requests`: all tests in
one request, checking-program tests included, all programs in one batch call), and
the pass rate over all tests feeds `cobalt.shared.reward.score_response`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cobalt.shared.clients import ExecutorClient
from cobalt.shared.contracts import BatchExecuteRequest, Limits, StoredTest, Verdict
from cobalt.shared.execution import merge_responses, plan_requests
from cobalt.shared.extraction import extract_program
from cobalt.shared.reward import RewardBreakdown, RewardFormat, TokenCounter, score_response

__all__ = ["ScoredResponse", "score_with_executor"]


@dataclass(frozen=True, slots=True)
class ScoredResponse:
    """A response's reward and what the executor said about each test."""

    reward: RewardBreakdown
    verdicts: tuple[Verdict, ...]
    """One verdict per test, in the given order; empty when there was no program to run."""


def score_with_executor(
    response: str,
    tests: Sequence[StoredTest],
    *,
    prev_best: float,
    executor: ExecutorClient,
    tokens: TokenCounter,
    limits: Limits | None = None,
    reward_format: RewardFormat = RewardFormat.REASONING,
) -> ScoredResponse:
    """Run the response's program on `tests` and compute its reward.

    Args:
        response: The model's whole response.
        tests: The problem's tests in the executor's stored format; all of them count.
        prev_best: b, the context's best earlier pass rate.
        executor: Where the program runs.
        tokens: The policy's token counter, for the length terms.
        limits: Per-test limits; the executor's defaults when None.
        reward_format: The format rules to apply (`RewardFormat`).

    Returns:
        The reward breakdown and the per-test verdicts.

    Raises:
        ValueError: `tests` is empty or `prev_best` is outside [0, 1].
        CobaltError: the executor failed (unreachable, refused the request).
    """
    if not tests:
        raise ValueError("a response needs at least one test to be scored")
    if not 0.0 <= prev_best <= 1.0:
        raise ValueError(f"prev_best must be in [0, 1], not {prev_best}")
    program = extract_program(response)
    verdicts: tuple[Verdict, ...] = ()
    passed = 0
    if program is not None:  # no program: nothing runs, and p = 0 of all the tests
        plans = plan_requests(program, tests, limits=limits)
        batch = BatchExecuteRequest(requests=[plan.request for plan in plans])
        merged = merge_responses(plans, executor.execute_batch(batch).results)
        verdicts = tuple(result.verdict for result in merged.results)
        passed = merged.passed
    reward = score_response(
        response,
        tests_passed=passed,
        tests_total=len(tests),
        prev_best=prev_best,
        tokens=tokens,
        reward_format=reward_format,
    )
    return ScoredResponse(reward=reward, verdicts=verdicts)
