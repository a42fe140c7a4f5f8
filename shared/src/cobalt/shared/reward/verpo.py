"""The VeRPO reward: dense credit for partial test passes, each test weighted by how hard
the group found it, combined with the all-tests outcome (docs/method.md, "VeRPO").

VeRPO (Wang et al., "VeRPO: Verifiable Dense Reward Policy Optimization for Code
Generation", arXiv 2601.03525) estimates a difficulty weight for every unit test from
the execution statistics of the group sampled for one prompt, rewards a program with the
sum of the weights of the tests it passes, and integrates that dense signal with the
global outcome (every test passed). For a group of M executed programs and m tests, with
pass_ij = 1 when program i passes test j:

    rho_j = (1 / M) * sum_i pass_ij                  the test's pass rate in the group
    d_j   = 1 - rho_j                                its difficulty
    w_j   = d_j / sum_k d_k    (1 / m when every d_k = 0)
    D_i   = sum_j w_j * pass_ij                      dense reward, in [0, 1]
    O_i   = 1 if program i passes every test else 0  outcome reward
    r_i   = alpha * O_i + (1 - alpha) * D_i          alpha = outcome_weight (0.5)

From the paper (its abstract and public summaries of its method section): per-test
weights estimated online from the group's execution statistics, the empirical pass rate
rho_j of each test over the group, a dense reward that sums the weights of the passed
tests, and its combination with the global execution outcome. Cobalt's reading, where the
text we could read gives no formula: the difficulty 1 - rho_j normalised to sum to 1 (so
D is in [0, 1] and a program passing every test gets D = 1), the uniform weights when no
test discriminates, and the convex mix with alpha = 0.5, which keeps every full pass
(r = 1) above every partial one (r < 0.5). A test every program passes weighs 0: it does
not tell the group's programs apart. Later versions of the paper add a calibration for
the number of tests passed ("cardinality bias") whose formula we could not read; it is
not implemented.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cobalt.shared import defaults
from cobalt.shared.contracts.executor import Verdict

__all__ = [
    "DEFAULT_OUTCOME_WEIGHT",
    "VerpoScore",
    "difficulty_weights",
    "pass_vector",
    "group_pass_rates",
    "verpo_scores",
]

DEFAULT_OUTCOME_WEIGHT = defaults.VERPO_OUTCOME_WEIGHT
"""alpha: the outcome's share of the reward, the dense reward's is 1 - alpha."""


@dataclass(frozen=True, slots=True)
class VerpoScore:
    """One program's VeRPO reward and its two parts."""

    dense: float
    """D: the sum of the difficulty weights of the tests it passed, in [0, 1]."""
    outcome: float
    """O: 1.0 if it passed every test, else 0.0."""
    reward: float
    """r = alpha * O + (1 - alpha) * D."""


def pass_vector(verdicts: Sequence[str], tests_total: int) -> list[bool]:
    """Which of `tests_total` tests passed, from their verdicts in test order.

    Missing verdicts (a program that was never run, e.g. no code block) count as fails.

    Raises:
        ValueError: more verdicts than tests, or a `sandbox_error`: a test the sandbox
            failed to run says nothing about the program, so it must never become a fail
            (callers mask such a program; docs/reward.md "Infrastructure errors").
    """
    if Verdict.SANDBOX_ERROR in verdicts:
        raise ValueError("a sandbox_error is not a verdict on the program; mask it, never score it")
    if len(verdicts) > tests_total:
        raise ValueError(f"{len(verdicts)} verdicts for {tests_total} tests")
    passed = [verdict == Verdict.ACCEPTED for verdict in verdicts]
    return passed + [False] * (tests_total - len(passed))


def _checked(passes: Sequence[Sequence[bool]]) -> int:
    """The test count m shared by every vector of a non-empty group."""
    if not passes:
        raise ValueError("a group needs at least one executed program")
    sizes = {len(vector) for vector in passes}
    if len(sizes) != 1:
        raise ValueError(f"pass vectors of different lengths: {sorted(sizes)}")
    tests = sizes.pop()
    if tests == 0:
        raise ValueError("pass vectors need at least one test")
    return tests


def group_pass_rates(passes: Sequence[Sequence[bool]]) -> list[float]:
    """rho_j: the share of the group's programs that passed test j."""
    tests = _checked(passes)
    return [sum(bool(vector[j]) for vector in passes) / len(passes) for j in range(tests)]


def difficulty_weights(pass_rates: Sequence[float]) -> list[float]:
    """w_j = (1 - rho_j) / sum_k (1 - rho_k); uniform when every test was always passed."""
    if not pass_rates:
        raise ValueError("weights need at least one test")
    if any(not 0.0 <= rate <= 1.0 for rate in pass_rates):
        raise ValueError(f"pass rates must lie in [0, 1]: {list(pass_rates)}")
    difficulties = [1.0 - rate for rate in pass_rates]
    total = sum(difficulties)
    if total == 0.0:
        return [1.0 / len(pass_rates)] * len(pass_rates)
    return [difficulty / total for difficulty in difficulties]


def verpo_scores(
    passes: Sequence[Sequence[bool]], *, outcome_weight: float = DEFAULT_OUTCOME_WEIGHT
) -> list[VerpoScore]:
    """The VeRPO reward of every program of one group, weights from the group itself.

    Raises:
        ValueError: an empty group, no tests, vectors of different lengths, or an
            outcome weight outside [0, 1].
    """
    if not 0.0 <= outcome_weight <= 1.0:
        raise ValueError(f"outcome_weight must lie in [0, 1], not {outcome_weight}")
    weights = difficulty_weights(group_pass_rates(passes))
    scores = []
    for vector in passes:
        dense = sum(w for w, passed in zip(weights, vector, strict=True) if passed)
        outcome = 1.0 if all(vector) else 0.0
        dense = 1.0 if outcome else min(dense, 1.0)  # exact 1 despite float rounding
        scores.append(
            VerpoScore(
                dense=dense,
                outcome=outcome,
                reward=outcome_weight * outcome + (1.0 - outcome_weight) * dense,
            )
        )
    return scores
