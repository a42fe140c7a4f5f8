"""A scored group's fate (`training.jobs.group_outcome`), a pure function of the job's
settings and the group's rewards: no database, no model, no sandbox."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cobalt.orchestrator.store.repo_training import ZERO_VARIANCE, SampleRow
from cobalt.orchestrator.training.jobs import GroupOutcome, group_outcome
from cobalt.orchestrator.training.rollout import ScoredGroup
from cobalt.shared.contracts.training_params import CobaltParams
from tests.support.ledger import ledger_sample


def sample(index: int, passed: int, *, turn: int = 0) -> SampleRow:
    """A scored response passing `passed` of 4 tests (`turn`: of episode `index`)."""
    return replace(ledger_sample(index, passed), turn=turn)


def group(*samples: SampleRow, masked: int = 0) -> ScoredGroup:
    return ScoredGroup(policy_version=3, samples=list(samples), seconds={}, masked=masked)


@pytest.mark.parametrize("filter_zero_variance", [False, True])
def test_a_group_with_a_reward_spread_is_trained_on(filter_zero_variance: bool) -> None:
    params = CobaltParams(filter_zero_variance=filter_zero_variance)
    assert group_outcome(params, group(sample(0, 4), sample(1, 1)), 2) == GroupOutcome(trained=True)


def test_a_flat_group_is_dropped_with_its_samples_only_when_the_job_filters() -> None:
    flat = group(sample(0, 2), sample(1, 2), sample(2, 2))
    assert group_outcome(CobaltParams(), flat, 3).trained
    outcome = group_outcome(CobaltParams(filter_zero_variance=True), flat, 3)
    assert not outcome.trained and outcome.samples_kept
    assert outcome.drop_reason is not None and outcome.drop_reason.startswith(ZERO_VARIANCE)


def test_an_episode_s_turns_count_once_for_its_variance() -> None:
    """Two turns of one episode share its reward: one episode is no spread to learn from,
    and two equal episodes of several turns are flat, not informative."""
    params = CobaltParams(filter_zero_variance=True)
    two_turns = [sample(0, 2), sample(0, 2, turn=1)]
    assert not group_outcome(params, group(*two_turns, sample(1, 2)), 2).trained
    assert group_outcome(params, group(*two_turns, sample(1, 4)), 2).trained


@pytest.mark.parametrize("filter_zero_variance", [False, True])
def test_a_group_with_fewer_than_two_judged_responses_is_dropped_without_samples(
    filter_zero_variance: bool,
) -> None:
    params = CobaltParams(filter_zero_variance=filter_zero_variance)
    outcome = group_outcome(params, group(sample(0, 4), masked=3), 4)
    assert not outcome.trained and not outcome.samples_kept
    assert outcome.drop_reason == (
        "sandbox errors: 3 of 4 responses masked, fewer than two judged ones left for a "
        "GRPO baseline"
    )
    # Two judged responses are a baseline, whatever was masked beside them.
    assert group_outcome(params, group(sample(0, 4), sample(1, 0), masked=2), 4).trained
