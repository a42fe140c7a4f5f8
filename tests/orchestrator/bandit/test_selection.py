"""The builder's pure rules: docs/method.md's worked down-sampling examples and pass rates."""

from __future__ import annotations

import pytest

from cobalt.orchestrator.bandit.selection import (
    RESEARCH_FIRST_STOP_TURNS,
    DropCounts,
    TrajectoryScores,
    max_variance_subset,
    pass_over_all_tests,
    plan_contexts,
    plan_research_validation_contexts,
    plan_validation_context,
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


def test_the_first_context_stop_reads_turns_0_and_1_or_the_research_0_and_2() -> None:
    solved_at_0_and_2 = TrajectoryScores(0, (1.0, 0.5, 1.0, 1.0), (True, False, True, True))
    solved_at_0_and_1 = TrajectoryScores(1, (1.0, 1.0, 0.5, 1.0), (True, True, False, True))
    failing = TrajectoryScores(2, (0.0, 0.0, 0.0, 0.0), (False,) * 4)  # keeps the problem
    for trajectory, default_stops in [(solved_at_0_and_2, False), (solved_at_0_and_1, True)]:
        default, research = DropCounts(), DropCounts()
        _, by_default = plan_contexts([trajectory, failing], default)
        _, by_research = plan_contexts(
            [trajectory, failing], research, first_stop_turns=RESEARCH_FIRST_STOP_TURNS
        )
        assert (by_default == []) is default_stops
        assert (by_research == []) is not default_stops
        assert default.stopped_first_context_both_pass == int(default_stops)
        assert research.stopped_first_context_both_pass == int(not default_stops)


def test_research_validation_plans_turn_0_and_the_smallest_improvement_contexts() -> None:
    small = TrajectoryScores(0, (0.0, 0.5, 0.25, 0.5), (False, False, False, False))
    large = TrajectoryScores(1, (0.0, 1.0, 1.0, 1.0), (False, True, True, True))
    flat = TrajectoryScores(2, (0.5, 0.5, 0.5, 0.5), (False, False, False, False))
    counts = DropCounts()
    emit, plans = plan_research_validation_contexts([large, small, flat], counts)
    assert emit
    assert [(p.sample_index, p.assistant_turns, p.prev_best) for p in plans] == [
        (0, 1, 0.0),
        (0, 2, 0.5),
        (0, 3, 0.5),
    ]
    assert counts.not_candidates == 1 and counts.dropped_by_downsampling == 1
    no_candidate = DropCounts()
    assert plan_research_validation_contexts([flat], no_candidate) == (True, [])
    assert no_candidate.problems_without_candidate == 1
    assert plan_validation_context([flat], DropCounts()) is None
    solved = TrajectoryScores(3, (1.0, 1.0), (True, True))
    assert plan_research_validation_contexts([solved], DropCounts()) == (False, [])
