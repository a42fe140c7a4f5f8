"""The off-policy window's rules (`training.staleness`), the orchestrator's alone."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cobalt.orchestrator.training.staleness import is_stale, open_rounds, scheduling_step

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
