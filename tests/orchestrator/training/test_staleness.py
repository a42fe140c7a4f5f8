"""The off-policy window's rules (`training.staleness`), the orchestrator's alone."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cobalt.orchestrator.training.staleness import (
    is_stale,
    open_rounds,
    rounds_to_begin,
    scheduling_step,
    stale_for,
)

counts = st.integers(min_value=0, max_value=50)


@given(steps_done=counts, max_staleness=counts, budget=st.none() | counts, begun=counts)
def test_open_rounds_are_begun_untrained_within_the_window_and_the_budget(
    steps_done: int, max_staleness: int, budget: int | None, begun: int
) -> None:
    rounds = open_rounds(
        steps_done=steps_done, max_staleness=max_staleness, budget=budget, begun=begun
    )
    for round in rounds:
        assert steps_done < round <= steps_done + 1 + max_staleness  # not trained, in reach
        assert round <= begun and (budget is None or round <= budget)
        # Its scheduling step was claimed before the trainer could begin it.
        assert scheduling_step(round, max_staleness=max_staleness) <= steps_done
    if begun > steps_done + max_staleness and (budget is None or budget > begun):
        assert len(rounds) == max_staleness + 1  # the whole window is open


def test_a_trainer_that_stopped_after_its_last_step_leaves_no_round_open() -> None:
    """`--until-step 5`: step 5 reported, round 6 never begun: nothing to recover."""
    assert list(open_rounds(steps_done=5, max_staleness=0, budget=None, begun=5)) == []
    assert list(open_rounds(steps_done=4, max_staleness=1, budget=None, begun=6)) == [5, 6]


@given(current=counts, sampled=counts, max_staleness=counts)
def test_a_sample_is_stale_past_the_window_only(
    current: int, sampled: int, max_staleness: int
) -> None:
    assert is_stale(
        current_version=current, sampled_version=sampled, max_staleness=max_staleness
    ) == (sampled < current - max_staleness)


@given(step=st.integers(min_value=1, max_value=50), max_staleness=counts, budget=st.none() | counts)
def test_a_step_begins_its_own_round_and_the_window_ahead_within_the_budget(
    step: int, max_staleness: int, budget: int | None
) -> None:
    rounds = list(rounds_to_begin(step, max_staleness=max_staleness, budget=budget))
    if budget is None or step <= budget:
        assert rounds[0] == step  # the step's own round first
    ahead = step + max_staleness if budget is None else min(step + max_staleness, budget)
    assert rounds == list(range(step, ahead + 1))
    # What a trainer on the next step has open is this window moved on by one.
    begun = max(rounds, default=0)
    assert list(open_rounds(steps_done=step, max_staleness=max_staleness, budget=budget,
                            begun=begun)) == [r for r in rounds if r > step]  # fmt: skip


def test_a_job_two_rounds_ahead_with_a_budget_of_three() -> None:
    assert list(rounds_to_begin(1, max_staleness=2, budget=3)) == [1, 2, 3]
    assert list(rounds_to_begin(2, max_staleness=2, budget=3)) == [2, 3]  # none past it
    assert list(rounds_to_begin(4, max_staleness=0, budget=None)) == [4]  # synchronous


def test_the_claim_s_predicate_is_the_rule_at_the_trainer_s_version() -> None:
    stale = stale_for(5, max_staleness=1)
    assert [version for version in range(7) if stale(version)] == [0, 1, 2, 3]
