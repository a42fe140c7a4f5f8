"""How each training mode rolls out and scores one context's group: one small interface
(`GroupScorer`), one implementation per mode, chosen from `SCORERS` by the job's mode.

A new mode adds its parameters to `cobalt.shared.contracts.training_params` and its
scorer here (docs/extending.md "A new training mode"); the rollout job never branches on
the mode.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams
from cobalt.orchestrator.training.episodes import EpisodeSpec, roll_out_episodes
from cobalt.orchestrator.training.rollout import GroupContext, ScoredGroup, roll_out_group
from cobalt.orchestrator.training.verpo import roll_out_verpo_episodes
from cobalt.shared.clients import AsyncExecutorClient
from cobalt.shared.contracts.training import TrainingMode
from cobalt.shared.contracts.training_params import (
    CobaltParams,
    EpisodeParams,
    MultiTurnParams,
    SingleTurnParams,
    TrainingParams,
    VerpoParams,
)
from cobalt.shared.reward import TokenCounter

__all__ = ["GroupRollout", "GroupScorer", "SCORERS", "score_group"]


@dataclass(frozen=True, slots=True)
class GroupRollout:
    """What every scorer gets: the context, the clients, the policy's tokens, the sampling
    settings and (episode modes) the feedback template."""

    context: GroupContext
    sampler: ChatSampler
    executor: AsyncExecutorClient
    tokens: TokenCounter
    sampling: SamplingParams
    template: PromptTemplate | None


GroupScorer = Callable[[GroupRollout, Any], Awaitable[ScoredGroup]]
"""(the group's rollout, the job's parameters of that mode) -> the scored group."""


def _episode_arguments(rollout: GroupRollout, params: EpisodeParams) -> dict[str, Any]:
    """What every episode mode's loop takes: the clients, the sampling, the feedback
    template and the episode's settings."""
    if rollout.template is None:
        raise ValueError("an episode mode needs its feedback template")
    return {
        "sampler": rollout.sampler,
        "executor": rollout.executor,
        "params": rollout.sampling,
        "template": rollout.template,
        "spec": EpisodeSpec(
            max_turns=params.episode_turns,
            stop_on_pass=params.stop_on_pass,
            think_cap_chars=params.think_cap_chars,
            judge_retries=params.judge_retries,
        ),
    }


async def _single_turn(
    rollout: GroupRollout, params: CobaltParams | SingleTurnParams
) -> ScoredGroup:
    """Cobalt and single-turn GRPO: one response per sample, the Cobalt reward."""
    return await roll_out_group(
        rollout.context,
        sampler=rollout.sampler,
        executor=rollout.executor,
        tokens=rollout.tokens,
        params=rollout.sampling,
        reward_format=params.reward_format,
        judge_retries=params.judge_retries,
    )


async def _multi_turn(rollout: GroupRollout, params: MultiTurnParams) -> ScoredGroup:
    """Online episodes, each rewarded by its last turn."""
    return await roll_out_episodes(
        rollout.context,
        tokens=rollout.tokens,
        reward_format=params.reward_format,
        **_episode_arguments(rollout, params),
    )


async def _verpo(rollout: GroupRollout, params: VerpoParams) -> ScoredGroup:
    """Online episodes, each turn rewarded by VeRPO."""
    return await roll_out_verpo_episodes(
        rollout.context,
        outcome_weight=params.verpo_outcome_weight,
        **_episode_arguments(rollout, params),
    )


SCORERS: dict[TrainingMode, GroupScorer] = {
    TrainingMode.COBALT: _single_turn,
    TrainingMode.SINGLE_TURN: _single_turn,
    TrainingMode.MULTI_TURN: _multi_turn,
    TrainingMode.VERPO: _verpo,
}
"""Each mode's scorer; tests/orchestrator/training/test_scorers.py checks every mode has one."""


async def score_group(rollout: GroupRollout, params: TrainingParams) -> ScoredGroup:
    """The group rolled out and scored by the scorer of `params.mode`."""
    return await SCORERS[params.mode](rollout, params)
