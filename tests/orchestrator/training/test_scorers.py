"""The scorer table: every training mode has one, an episode mode needs its template, and
every scorer writes its ledger rows through `ledger_rows`."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from cobalt.orchestrator.rollouts.sampling import Sample
from cobalt.orchestrator.training.rollout import GroupContext, ledger_rows
from cobalt.orchestrator.training.scorers import SCORERS, GroupRollout, score_group
from cobalt.shared.contracts.training import TrainingMode
from cobalt.shared.contracts.training_params import MultiTurnParams, VerpoParams
from cobalt.shared.reward import RewardBreakdown


def test_every_mode_has_a_scorer() -> None:
    assert set(SCORERS) == set(TrainingMode)
    # Modes that share a reward share a scorer; the episode modes have their own.
    assert SCORERS[TrainingMode.COBALT] is SCORERS[TrainingMode.SINGLE_TURN]
    distinct = {SCORERS[m] for m in (TrainingMode.COBALT, TrainingMode.MULTI_TURN, "verpo")}
    assert len(distinct) == 3


@pytest.mark.parametrize("params", [MultiTurnParams(), VerpoParams()])
def test_an_episode_mode_without_its_template_is_refused(params: Any) -> None:
    context = GroupContext(
        context_key="bandit:1", problem_id=1, messages=[], prev_best=0.0, tests=[], public_count=0
    )
    nothing = cast(Any, None)  # never reached: the template is checked first
    rollout = GroupRollout(context, nothing, nothing, nothing, nothing, template=None)
    with pytest.raises(ValueError, match="feedback template"):
        asyncio.run(score_group(rollout, params))


def _sample(text: str) -> Sample:
    return Sample(
        text=text,
        finish_reason="stop",
        prompt_token_ids=[1, 2],
        completion_token_ids=[3],
        completion_logprobs=[-0.5],
        prompt_tokens=2,
        completion_tokens=1,
        latency_ms=1.0,
        model="m",
        policy_version=7,
    )


def _reward(total: float) -> RewardBreakdown:
    return RewardBreakdown(
        total=total,
        total_before_clip=total,
        validation_reward=0.0,
        pass_rate=0.0,
        prev_best=0.0,
        tests_passed=0,
        tests_total=1,
        no_code=True,
    )


def test_ledger_rows_are_one_per_turn_of_each_rewarded_episode() -> None:
    episodes = {0: [_sample("a0"), _sample("a1")], 1: [_sample("b0")], 2: [_sample("c0")]}
    verdicts = {0: [["fail"], ["pass", "pass"]], 1: [["pass"]], 2: [["sandbox_error"]]}
    # Episode 2 was masked: no reward, so no rows.
    rows = ledger_rows(episodes, verdicts, {1: _reward(1.0), 0: _reward(-0.5)})
    assert [(r.sample_index, r.turn, r.response) for r in rows] == [
        (1, 0, "b0"),
        (0, 0, "a0"),
        (0, 1, "a1"),
    ]
    assert [list(r.verdicts) for r in rows] == [["pass"], ["fail"], ["pass", "pass"]]
    assert [r.reward.total for r in rows] == [1.0, -0.5, -0.5]
    assert all(
        (list(r.prompt_token_ids), list(r.response_token_ids), list(r.response_logprobs))
        == ([1, 2], [3], [-0.5])
        for r in rows
    )
