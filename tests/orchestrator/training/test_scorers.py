"""The scorer table: every training mode has one, and an episode mode needs its template."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from cobalt.orchestrator.training.rollout import GroupContext
from cobalt.orchestrator.training.scorers import SCORERS, GroupRollout, score_group
from cobalt.shared.contracts.training import TrainingMode
from cobalt.shared.contracts.training_params import MultiTurnParams, VerpoParams


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
