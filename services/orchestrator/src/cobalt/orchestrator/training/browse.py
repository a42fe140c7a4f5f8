"""Training jobs read for people: the groups of each step with every sample, its reward
and its advantage; and whether the job's trainer is still alive.

The advantage is recomputed from the ledger's rewards with the trainer's formula
(`cobalt.trainer.grpo.group_advantages`: (r - mean) / (std + 1e-6), std with Bessel's
correction, exactly 0 when every reward of the group is equal; in a multi-turn group one
reward per episode, its first row's, as `trainer.step.episode_advantages` takes it), so
the page shows what the trainer trained on without storing a second copy. A job with
`reward_shuffle_seed` (the shuffled-reward control) trained on its rewards permuted within
each group: its advantages are computed from the same permutation
(`cobalt.shared.reward_shuffle`), so each sample shows the advantage it was trained with
beside its own reward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_training
from cobalt.orchestrator.store.models import TrainingGroup, TrainingJob
from cobalt.shared.contracts.browse import TurnRewardPublic
from cobalt.shared.contracts.statuses import TrainingJobStatus
from cobalt.shared.contracts.training import (
    JobLiveness,
    LedgerGroupPublic,
    LedgerSamplePublic,
    StepGroupsPublic,
)
from cobalt.shared.reward_shuffle import shuffled_within_groups

__all__ = [
    "ADVANTAGE_EPSILON",
    "DEFAULT_STALE_S",
    "group_advantages",
    "last_activity",
    "liveness_of",
    "mean_and_std",
    "step_groups",
]

ADVANTAGE_EPSILON = 1e-6
"""The trainer's (cobalt.trainer.grpo.ADVANTAGE_EPSILON); the orchestrator has no torch."""

DEFAULT_STALE_S = 1800.0
"""COBALT_TRAINING_STALE_S's default: half an hour without a report is not a slow step."""

_WAITING = {TrainingJobStatus.PENDING.value, TrainingJobStatus.RUNNING.value}
_ENDED = {
    TrainingJobStatus.STOPPED.value,
    TrainingJobStatus.FINISHED.value,
    TrainingJobStatus.FAILED.value,
}
"""Named here, not derived from the enum: a status added later (e.g. a lifecycle "stale")
must not read as ended."""


def group_advantages(rewards: Sequence[float]) -> list[float | None]:
    """GRPO advantages of one group's rewards (None each for a group of one)."""
    if len(rewards) < 2:
        return [None] * len(rewards)
    if all(r == rewards[0] for r in rewards):
        return [0.0] * len(rewards)
    mean, std = mean_and_std(rewards)
    return [(r - mean) / (std + ADVANTAGE_EPSILON) for r in rewards]


def mean_and_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and Bessel-corrected standard deviation (torch.std's; 0 for fewer than two)."""
    if not values:
        return 0.0, 0.0
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    return mean, math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))


def liveness_of(
    status: str, last_activity_at: datetime | None, now: datetime, stale_after_s: float
) -> JobLiveness:
    """Live, stale or ended: a waiting job is stale once silent for `stale_after_s`.

    A status the lifecycle may add for this (e.g. "stale") is neither waiting nor ended
    here, and reads as stale.
    """
    if status in _WAITING:
        if last_activity_at is None:
            return JobLiveness.LIVE
        silent = (now - _aware(last_activity_at)).total_seconds()
        return JobLiveness.STALE if silent > stale_after_s else JobLiveness.LIVE
    return JobLiveness.ENDED if status in _ENDED else JobLiveness.STALE


def _aware(moment: datetime) -> datetime:
    # SQLite hands back naive datetimes (stored as UTC by func.now()).
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def last_activity(session: Session, job: TrainingJob) -> datetime:
    """The latest of: the job row's change, its last step report, its newest group."""
    moments = [job.updated_at, *repo_training.last_reports(session, job_id=job.id)]
    return max(_aware(m) for m in moments if m is not None)


def _episode_rewards(group: TrainingGroup) -> dict[int, float]:
    rewards: dict[int, float] = {}
    for sample in group.samples:  # ordered by (sample_index, turn): turn 0 first
        rewards.setdefault(sample.sample_index, sample.total)
    return rewards


def _reward_shuffle_seed(job: TrainingJob) -> int | None:
    return job.params.trainer.reward_shuffle_seed


def step_groups(sessions: sessionmaker[Session], job_id: int, step: int) -> StepGroupsPublic:
    """The groups step `step` consumed or dropped (stale, or unjudged), with every sample.

    Raises:
        NotFound: no such job.
    """
    with sessions() as session:
        job = repo_training.get_job(session, job_id=job_id)
        shuffle_seed = _reward_shuffle_seed(job)
        groups, names = repo_training.step_groups(session, job_id=job_id, step=step)
        public = []
        for group in groups:
            episodes = _episode_rewards(group)
            trained_on = list(episodes.values())
            if shuffle_seed is not None:
                trained_on = shuffled_within_groups(
                    trained_on, [group.id] * len(trained_on), shuffle_seed
                )
            advantage = dict(zip(episodes, group_advantages(trained_on), strict=True))
            mean, spread = mean_and_std(list(episodes.values()))
            public.append(
                LedgerGroupPublic(
                    id=group.id,
                    context_key=group.context_key,
                    problem=names.get(group.problem_id, str(group.problem_id)),
                    round=group.round,
                    policy_version=group.policy_version,
                    status=group.status,
                    step=group.step,
                    phase_seconds=group.phase_seconds,
                    reward_mean=mean,
                    reward_std=spread,
                    masked_samples=group.masked_samples,
                    drop_reason=group.drop_reason,
                    samples=[
                        LedgerSamplePublic(
                            sample_index=sample.sample_index,
                            turn=sample.turn,
                            response=sample.response,
                            response_tokens=len(sample.response_token_ids),
                            verdicts=sample.verdicts,
                            reward=sample.total,
                            pass_rate=sample.pass_rate,
                            advantage=advantage.get(sample.sample_index),
                            components=TurnRewardPublic.model_validate(
                                sample, from_attributes=True
                            ),
                        )
                        for sample in group.samples
                    ],
                )
            )
    return StepGroupsPublic(job_id=job_id, step=step, groups=public)
