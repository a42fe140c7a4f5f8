"""The VeRPO reward on hand-computed groups (docs/method.md, "VeRPO", has the same values).

Worked group: four programs on three tests,

    p0 = [1, 0, 0]   p1 = [1, 1, 0]   p2 = [1, 1, 1]   p3 = [0, 0, 0]

rho = [3/4, 2/4, 1/4], difficulties [1/4, 1/2, 3/4] (sum 3/2), weights [1/6, 1/3, 1/2];
dense D = [1/6, 1/2, 1, 0], outcome O = [0, 0, 1, 0]; with alpha = 0.5,
r = [1/12, 1/4, 1, 0].
"""

from __future__ import annotations

import pytest

from cobalt.shared.reward import (
    difficulty_weights,
    group_pass_rates,
    pass_vector,
    verpo_scores,
)

WORKED = [
    [True, False, False],
    [True, True, False],
    [True, True, True],
    [False, False, False],
]


def test_the_worked_group() -> None:
    assert group_pass_rates(WORKED) == [0.75, 0.5, 0.25]
    assert difficulty_weights([0.75, 0.5, 0.25]) == pytest.approx([1 / 6, 1 / 3, 1 / 2])
    scores = verpo_scores(WORKED)
    assert [s.dense for s in scores] == pytest.approx([1 / 6, 1 / 2, 1.0, 0.0])
    assert [s.outcome for s in scores] == [0.0, 0.0, 1.0, 0.0]
    assert [s.reward for s in scores] == pytest.approx([1 / 12, 1 / 4, 1.0, 0.0])


def test_the_outcome_weight_moves_credit_between_outcome_and_dense() -> None:
    dense_only = verpo_scores(WORKED, outcome_weight=0.0)
    assert [s.reward for s in dense_only] == pytest.approx([1 / 6, 1 / 2, 1.0, 0.0])
    outcome_only = verpo_scores(WORKED, outcome_weight=1.0)
    assert [s.reward for s in outcome_only] == [0.0, 0.0, 1.0, 0.0]
    # alpha = 0.8: r = 0.8 O + 0.2 D.
    assert [s.reward for s in verpo_scores(WORKED, outcome_weight=0.8)] == pytest.approx(
        [0.2 / 6, 0.1, 1.0, 0.0]
    )


def test_harder_tests_pay_more() -> None:
    # Two programs each pass one test: test 0 is passed by 3 of 4, test 2 by 1 of 4.
    group = [[True, False, False], [False, False, True], [True, False, False], [True, False, False]]
    # rho = [3/4, 0, 1/4]; d = [1/4, 1, 3/4] (sum 2); w = [1/8, 1/2, 3/8].
    assert difficulty_weights(group_pass_rates(group)) == pytest.approx([1 / 8, 1 / 2, 3 / 8])
    easy, hard = verpo_scores(group)[0], verpo_scores(group)[1]
    assert easy.dense == pytest.approx(1 / 8) and hard.dense == pytest.approx(3 / 8)
    assert (easy.reward, hard.reward) == pytest.approx((1 / 16, 3 / 16))


def test_every_program_passes_everything() -> None:
    # No test discriminates: difficulties all 0, uniform weights; D = O = r = 1.
    group = [[True, True], [True, True], [True, True]]
    assert difficulty_weights(group_pass_rates(group)) == [0.5, 0.5]
    assert all((s.dense, s.outcome, s.reward) == (1.0, 1.0, 1.0) for s in verpo_scores(group))


def test_no_program_passes_anything() -> None:
    # rho = 0 everywhere: uniform weights 1/3; nothing passed, so every reward is 0.
    group = [[False, False, False]] * 4
    assert difficulty_weights(group_pass_rates(group)) == pytest.approx([1 / 3] * 3)
    assert all((s.dense, s.outcome, s.reward) == (0.0, 0.0, 0.0) for s in verpo_scores(group))


def test_a_test_everyone_passes_weighs_nothing() -> None:
    # Test 0 is passed by all: w = [0, 1/2, 1/2]; passing only it earns nothing.
    group = [[True, False, False], [True, True, False], [True, False, True]]
    assert difficulty_weights(group_pass_rates(group)) == pytest.approx([0.0, 0.5, 0.5])
    assert [s.dense for s in verpo_scores(group)] == pytest.approx([0.0, 0.5, 0.5])


def test_one_test() -> None:
    # m = 1: w = [1] whatever rho is, so D = O = the test's verdict and r = the verdict.
    group = [[True], [False], [False]]
    assert difficulty_weights(group_pass_rates(group)) == [1.0]
    assert [s.reward for s in verpo_scores(group)] == [1.0, 0.0, 0.0]
    assert [s.reward for s in verpo_scores([[True], [True]])] == [1.0, 1.0]


def test_tied_pass_rates_get_tied_weights_and_tied_programs_tied_rewards() -> None:
    # Tests 0 and 1 are both passed by 1 of 2 programs, test 2 by none:
    # rho = [1/2, 1/2, 0], d = [1/2, 1/2, 1] (sum 2), w = [1/4, 1/4, 1/2].
    group = [[True, False, False], [False, True, False]]
    assert difficulty_weights(group_pass_rates(group)) == pytest.approx([0.25, 0.25, 0.5])
    first, second = verpo_scores(group)
    assert first == second
    assert first.reward == pytest.approx(0.125)


def test_a_full_pass_always_beats_a_partial_one() -> None:
    # Whatever the weights, a partial pass has O = 0 and D <= 1, so r <= 1 - alpha, while a
    # full pass has r = 1. Here only p1 passes test 3 and the others pass tests 0-2.
    group = [[True, True, True, False], [True, True, True, True]] + [[True, True, True, False]] * 6
    rewards = [s.reward for s in verpo_scores(group)]
    assert rewards[1] == 1.0
    assert max(rewards[0], *rewards[2:]) < 0.5


def test_pass_vectors_from_verdicts() -> None:
    assert pass_vector(["accepted", "wrong_answer", "time_limit"], 3) == [True, False, False]
    assert pass_vector([], 2) == [False, False]  # no program: every test failed
    assert pass_vector(["accepted"], 3) == [True, False, False]
    with pytest.raises(ValueError, match="3 verdicts for 2 tests"):
        pass_vector(["accepted"] * 3, 2)


@pytest.mark.parametrize(
    ("passes", "message"),
    [
        ([], "at least one executed program"),
        ([[]], "at least one test"),
        ([[True], [True, False]], "different lengths"),
    ],
)
def test_malformed_groups_are_refused(passes: list[list[bool]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        verpo_scores(passes)


def test_outcome_weights_outside_zero_one_are_refused() -> None:
    with pytest.raises(ValueError, match="outcome_weight"):
        verpo_scores(WORKED, outcome_weight=1.5)
    with pytest.raises(ValueError, match=r"pass rates must lie in \[0, 1\]"):
        difficulty_weights([0.5, 1.2])
