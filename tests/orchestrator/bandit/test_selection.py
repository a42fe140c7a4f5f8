"""The builder's pure rules: METHOD.md's worked down-sampling examples and pass rates."""

from __future__ import annotations

import pytest

from cobalt.orchestrator.bandit.selection import (
    DropCounts,
    TrajectoryScores,
    max_variance_subset,
    pass_over_all_tests,
    plan_contexts,
)


def kept(improvements: list[float]) -> list[float]:
    return sorted(improvements[i] for i in max_variance_subset(improvements))


def test_method_md_downsampling_examples() -> None:
    assert kept([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.9, 1.0]) == [0.1, 0.2, 0.9, 1.0]
    assert kept([0.1, 0.1, 0.1, 0.1, 0.1, 1.0]) == [0.1, 0.1, 0.1, 1.0]
    assert kept([0.5, 0.2, 0.7]) == [0.2, 0.5, 0.7]  # 4 or fewer: all
    assert kept([0.3, 0.1, 0.4, 0.2]) == [0.1, 0.2, 0.3, 0.4]
    assert max_variance_subset([]) == []


def test_each_swap_is_kept_only_when_it_raises_the_variance() -> None:
    # Variances: lowest 4 .0392, k=1 .0409, k=2 .0441, k=3 .0457: every step wins.
    assert kept([0.1, 0.5, 0.55, 0.6, 0.62]) == [0.1, 0.55, 0.6, 0.62]
    # Equal variances never replace the kept set: the 4 lowest (by sample order) stay.
    assert max_variance_subset([0.0, 1.0, 1.0, 1.0, 1.0]) == [0, 1, 2, 3]


def test_pass_over_all_tests_weights_public_and_hidden_by_their_counts() -> None:
    public, hidden = ["accepted", "wrong_answer"], ["accepted"] * 3 + ["time_limit"]
    # (hidden_rate * 4 + public_rate * 2) / 6 = (0.75 * 4 + 0.5 * 2) / 6
    assert pass_over_all_tests(public, hidden, True) == pytest.approx(4 / 6)
    assert pass_over_all_tests(public, hidden, False) == 0.0  # no program, nothing passes
    assert pass_over_all_tests([], [], True) == 0.0


def test_a_trajectory_is_cut_after_1_2_and_3_turns_with_prev_best() -> None:
    counts = DropCounts()
    trajectory = TrajectoryScores(0, (0.0, 0.5, 0.25, 1.0), (False, False, False, True))
    emit_turn_0, plans = plan_contexts([trajectory], counts)
    assert emit_turn_0
    assert [(p.assistant_turns, p.prev_best) for p in plans] == [(1, 0.0), (2, 0.5), (3, 0.5)]


def test_a_problem_whose_turn_0_samples_all_pass_is_skipped() -> None:
    counts = DropCounts()
    solved = TrajectoryScores(0, (1.0, 1.0, 0.0), (True, True, False))
    assert plan_contexts([solved, solved], counts) == (False, [])
    assert counts.problems_all_pass_at_turn_0 == 1
