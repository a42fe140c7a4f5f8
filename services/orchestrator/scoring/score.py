"""Score a response as the trainer does: extract, run on every test, compute the reward.

For people checking a case by hand (`cobalt reward score`) and for anything else that
has a response and a test list: the program is the response's extracted program
(`cobalt.shared.extraction`), run on the tests through the executor in one batch (a
checking-program test gets a request of its own, as in rollouts), and the pass rate over
all tests feeds `cobalt.shared.reward.score_response`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cobalt.orchestrator.rollouts.execution import merge_responses, plan_requests
from cobalt.shared.clients import ExecutorClient
from cobalt.shared.contracts import BatchExecuteRequest, StoredTest
from cobalt.shared.extraction import extract_program
from cobalt.shared.reward import RewardBreakdown, TokenCounter, score_response

__all__ = ["ScoredResponse", "score_with_executor"]


@dataclass(frozen=True, slots=True)
class ScoredResponse:
    reward: RewardBreakdown
    verdicts: list[str]
    """One verdict per test in the given order; [] when the response had no program."""


def score_with_executor(
    response: str,
    tests: Sequence[StoredTest],
    *,
    prev_best: float,
    executor: ExecutorClient,
    tokens: TokenCounter,
) -> ScoredResponse:
    """Run the response's program on `tests` and compute its reward.

    Raises:
        ValueError: no tests, or prev_best outside [0, 1].
        CobaltError: the executor failed (unreachable, refused the request).
    """
    if not tests:
        raise ValueError("a response needs at least one test to be scored")
    code = extract_program(response)
    verdicts: list[str] = []
    pass_rate = 0.0
    if code is not None:
        plans = plan_requests(code, tests)
        results = executor.execute_batch(
            BatchExecuteRequest(requests=[plan.request for plan in plans])
        ).results
        merged = merge_responses(plans, results)
        verdicts = [str(result.verdict) for result in merged.results]
        pass_rate = merged.passed / merged.total
    reward = score_response(response, pass_rate=pass_rate, prev_best=prev_best, tokens=tokens)
    return ScoredResponse(reward=reward, verdicts=verdicts)
