"""A training group's sample as the ledger stores it (store/repo_training.py), for the
ledger's tests and the pure outcome function's alike."""

from __future__ import annotations

from cobalt.orchestrator.store.repo_training import SampleRow
from cobalt.shared.reward import TokenLengths, score_response

RESPONSE = "<think>ok</think>\n```python\nprint(1)\n```\n"


def ledger_sample(index: int, passed: int) -> SampleRow:
    """Sample `index` of a group, passing `passed` of 4 tests, scored as the trainer does."""
    return SampleRow(
        sample_index=index,
        response=RESPONSE,
        prompt_token_ids=[1, 2, 3],
        response_token_ids=[4, 5, index],
        response_logprobs=[-0.5, -0.25, -1.0 * index],
        verdicts=["accepted"] * passed + ["wrong_answer"] * (4 - passed),
        reward=score_response(
            RESPONSE,
            tests_passed=passed,
            tests_total=4,
            prev_best=0.25,
            lengths=TokenLengths(2, 9, 1),
        ),
    )
