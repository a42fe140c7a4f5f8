"""Training jobs and the sample ledger: writing scored groups, and claiming them per step.

Exactly once, without a distributed lock: a rollout worker writes a group in one
transaction under a unique key (job, context, round), so a retried job writes nothing
twice. The trainer claims the groups of step k with `claim_step`, which records k on each
group it takes (and on each one it drops as stale) in the same transaction. Asking again
for step k returns exactly those groups, so a trainer killed anywhere in step k resumes
from its last checkpoint (step k - 1), asks for k again and trains on the same samples;
nothing is trained twice, nothing is lost. A group left with fewer than two responses the
sandbox could judge is stored as `dropped` with its reason (`record_dropped_group`, under
the same unique key) and counted by the next claimed step like a stale one; so is a group
without reward variance when the job filters them (`record_group(drop_reason=...)`, its
samples kept for the record and the scheduler). The Redis
queue beside the ledger only wakes the trainer; the ledger alone decides what a step holds.

Like every repository module: keyword-only arguments, the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, selectinload

from cobalt.orchestrator.lifecycle import GroupEvent, JobEvent, group_after, job_after
from cobalt.orchestrator.store.db import conflict_insert
from cobalt.orchestrator.store.models import (
    Problem,
    TrainingGroup,
    TrainingGroupStatus,
    TrainingJob,
    TrainingJobStatus,
    TrainingSample,
    TrainingStep,
)
from cobalt.shared.contracts.training_params import TrainingParams
from cobalt.shared.errors import Conflict, InvalidInput, NotFound

if TYPE_CHECKING:  # an annotation only: the reward package imports numpy and tokenizers
    from cobalt.shared.reward import RewardBreakdown

__all__ = [
    "ClaimedStep",
    "SampleRow",
    "ZERO_VARIANCE",
    "apply_job_event",
    "claim_step",
    "claimed_visits",
    "create_job",
    "get_job",
    "group_counts",
    "last_reports",
    "list_jobs",
    "masked_share",
    "record_dropped_group",
    "record_group",
    "record_step",
    "round_groups",
    "step_groups",
    "step_was_claimed",
    "steps_of",
]


ZERO_VARIANCE = "zero_variance"
"""How the `drop_reason` of a group dropped for having no reward variance begins."""


@dataclass(frozen=True, slots=True)
class SampleRow:
    """One scored response of a group, as a rollout worker hands it to the ledger.

    In a multi-turn group `sample_index` is the episode and `turn` the assistant turn in
    it; every turn of an episode carries the episode's reward (its last turn's).
    """

    sample_index: int
    response: str
    prompt_token_ids: Sequence[int]
    response_token_ids: Sequence[int]
    response_logprobs: Sequence[float]
    verdicts: Sequence[str]
    reward: RewardBreakdown
    turn: int = 0


@dataclass(frozen=True, slots=True)
class ClaimedStep:
    """The groups step `step` trains on, and those it dropped as stale or unjudged."""

    step: int
    groups: list[TrainingGroup]
    stale: int
    dropped: int = 0
    """Groups without two judged responses, counted at this step (`record_dropped_group`)."""
    masked: int = 0
    """Responses masked for sandbox errors in this step's trained and dropped groups."""
    dropped_zero_variance: int = 0
    """Groups dropped for having no reward variance, counted at this step."""


def create_job(
    session: Session,
    *,
    name: str,
    model: str,
    bandit_dataset_id: int | None,
    params: TrainingParams,
) -> TrainingJob:
    """A new pending training job of `params.mode`.

    Raises:
        Conflict: a job of that name exists.
    """
    if session.scalar(select(TrainingJob.id).where(TrainingJob.name == name)) is not None:
        raise Conflict(f"a training job named {name!r} exists; pick another --name")
    job = TrainingJob(name=name, model=model, bandit_dataset_id=bandit_dataset_id, params=params)
    session.add(job)
    session.flush()
    return job


def get_job(session: Session, *, job_id: int, for_update: bool = False) -> TrainingJob:
    """The job, optionally locked until the transaction ends (PostgreSQL row lock).

    Raises:
        NotFound: no such job.
    """
    statement = select(TrainingJob).where(TrainingJob.id == job_id)
    if for_update:
        statement = statement.with_for_update()
    job = session.scalar(statement)
    if job is None:
        raise NotFound(f"training job {job_id} does not exist (see `cobalt train list`)")
    return job


def list_jobs(session: Session) -> list[TrainingJob]:
    """Every job, newest first."""
    return list(session.scalars(select(TrainingJob).order_by(TrainingJob.id.desc())))


def steps_of(session: Session, *, job_id: int) -> list[TrainingStep]:
    """The job's reported steps, in step order."""
    return list(
        session.scalars(
            select(TrainingStep).where(TrainingStep.job_id == job_id).order_by(TrainingStep.step)
        )
    )


def record_step(
    session: Session,
    *,
    job_id: int,
    step: int,
    policy_version: int,
    metrics: dict[str, float],
    checkpoint: dict[str, Any] | None = None,
) -> bool:
    """Store a step's report unless one is stored (a trainer retrying its report);
    returns whether it was stored now."""
    exists = session.scalar(
        select(TrainingStep.id).where(TrainingStep.job_id == job_id, TrainingStep.step == step)
    )
    if exists is not None:
        return False
    session.add(
        TrainingStep(
            job_id=job_id,
            step=step,
            policy_version=policy_version,
            metrics=metrics,
            checkpoint=checkpoint,
        )
    )
    return True


def apply_job_event(job: TrainingJob, event: JobEvent) -> TrainingJobStatus:
    """Move `job` as `event` does (`lifecycle.JOB_TRANSITIONS`); returns its new status.

    Raises:
        Conflict: the event cannot happen in the job's status.
    """
    status = job_after(job.id, job.status, event)
    job.status = status.value
    return status


def record_group(
    session: Session,
    *,
    job_id: int,
    context_key: str,
    round: int,
    problem_id: int,
    policy_version: int,
    samples: Sequence[SampleRow],
    phase_seconds: dict[str, float] | None = None,
    masked_samples: int = 0,
    drop_reason: str | None = None,
) -> int | None:
    """Store a scored group with its samples, unless (job, context, round) is stored;
    with a `drop_reason`, as `dropped` (kept in the ledger, never trained on).

    Returns:
        The new group's id; None when that group was already stored (first write wins,
        so a retried rollout job changes nothing).

    Raises:
        InvalidInput: fewer than two responses (episodes: GRPO needs a baseline), a repeated
            (sample_index, turn), or an episode whose turns carry different rewards.
    """
    keys = [(sample.sample_index, sample.turn) for sample in samples]
    episodes: dict[int, float] = {}
    for sample in samples:
        if episodes.setdefault(sample.sample_index, sample.reward.total) != sample.reward.total:
            raise InvalidInput(f"episode {sample.sample_index}: its turns carry different rewards")
    if len(episodes) < 2 or len(set(keys)) != len(keys):
        raise InvalidInput(
            f"a group needs two or more samples with distinct (index, turn), got {sorted(keys)}"
        )
    group_id = _insert_group(
        session,
        job_id=job_id,
        context_key=context_key,
        round=round,
        problem_id=problem_id,
        policy_version=policy_version,
        status=(
            TrainingGroupStatus.READY if drop_reason is None else TrainingGroupStatus.DROPPED
        ).value,
        phase_seconds=phase_seconds or {},
        masked_samples=masked_samples,
        drop_reason=drop_reason,
    )
    if group_id is None:
        return None
    session.add_all(
        TrainingSample(
            group_id=group_id,
            sample_index=sample.sample_index,
            turn=sample.turn,
            response=sample.response,
            prompt_token_ids=list(sample.prompt_token_ids),
            response_token_ids=list(sample.response_token_ids),
            response_logprobs=list(sample.response_logprobs),
            verdicts=list(sample.verdicts),
            **sample.reward.to_dict(),
        )
        for sample in samples
    )
    session.flush()
    return group_id


def _insert_group(session: Session, **values: Any) -> int | None:
    """Insert a group row unless (job, context, round) is stored; its id, or None."""
    statement = (
        conflict_insert(session)(TrainingGroup)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["job_id", "context_key", "round"])
        .returning(TrainingGroup.id)
    )
    return session.execute(statement).scalar_one_or_none()


def record_dropped_group(
    session: Session,
    *,
    job_id: int,
    context_key: str,
    round: int,
    problem_id: int,
    policy_version: int,
    masked_samples: int,
    reason: str,
    phase_seconds: dict[str, float] | None = None,
) -> int | None:
    """Store a group that is never trained on (no samples), with why; first write wins,
    as in `record_group`. Returns the new group's id, or None when it was already stored."""
    return _insert_group(
        session,
        job_id=job_id,
        context_key=context_key,
        round=round,
        problem_id=problem_id,
        policy_version=policy_version,
        status=TrainingGroupStatus.DROPPED.value,
        phase_seconds=phase_seconds or {},
        masked_samples=masked_samples,
        drop_reason=reason,
    )


def masked_share(session: Session, *, job_id: int, group_size: int) -> tuple[int, int]:
    """(masked responses, responses sampled) over the job's recorded groups, each of which
    sampled `group_size` responses (episodes), trained, dropped or stale alike."""
    masked, recorded = session.execute(
        select(
            func.coalesce(func.sum(TrainingGroup.masked_samples), 0), func.count(TrainingGroup.id)
        ).where(TrainingGroup.job_id == job_id)
    ).one()
    return int(masked), int(recorded) * group_size


def claim_step(
    session: Session,
    *,
    job_id: int,
    step: int,
    groups: int,
    stale: Callable[[int], bool],
    enough: int | None = None,
) -> ClaimedStep | None:
    """The groups of step `step`: the same ones every time it is asked for.

    The first call for a step takes the oldest ready groups, up to `groups`; `enough`
    (default `groups`) of them make the step ready (fewer: a job filtering zero-variance
    groups whose round has spent its refills trains on the informative ones it has). A group
    whose policy version is `stale` (the off-policy rule, `training.staleness`, applied for
    the claiming trainer's version) is marked stale with this step (counted, never trained
    on). When enough fresh ones are
    there, they are marked consumed by this step; otherwise nothing is marked as consumed
    and None is returned (wait for the rollouts; the stale marks stand, they stay stale).
    The job's row is locked first, so two trainers of one job cannot split a step. Steps are
    claimed in order from 1; the ledger, not the job row, knows which were claimed, so a
    trainer that checkpointed but died before reporting it still finds its steps.

    Raises:
        NotFound: no such job.
        InvalidInput: the step is neither claimed nor the next one, or was claimed with a
            different number of groups.
    """
    get_job(session, job_id=job_id, for_update=True)
    claimed = _groups_of_step(session, job_id, step, TrainingGroupStatus.CONSUMED)
    if claimed:
        if not (enough or groups) <= len(claimed) <= groups:
            raise InvalidInput(f"step {step} holds {len(claimed)} groups, not {groups}")
        return _claimed(session, job_id, step, claimed)
    last = _last_claimed_step(session, job_id)
    if step != last + 1:
        raise InvalidInput(
            f"job {job_id} has claimed steps up to {last}: claim {last + 1} next, or "
            f"one of those again; not {step}"
        )
    ready = session.scalars(
        select(TrainingGroup)
        .where(
            TrainingGroup.job_id == job_id,
            TrainingGroup.status == TrainingGroupStatus.READY.value,
        )
        .order_by(TrainingGroup.id)
    ).all()
    fresh: list[TrainingGroup] = []
    for group in ready:
        if stale(group.policy_version):
            status = group_after(group.id, group.status, GroupEvent.EXPIRE)
            group.status, group.step = status.value, step
        elif len(fresh) < groups:
            fresh.append(group)
    # Groups dropped for sandbox errors since the last claim are counted by this step.
    for group in session.scalars(
        select(TrainingGroup).where(
            TrainingGroup.job_id == job_id,
            TrainingGroup.status == TrainingGroupStatus.DROPPED.value,
            TrainingGroup.step.is_(None),
        )
    ):
        group.step = step
    session.flush()
    if not fresh or len(fresh) < (enough or groups):
        return None
    for group in fresh:
        status = group_after(group.id, group.status, GroupEvent.CONSUME)
        group.status, group.step = status.value, step
    session.flush()
    taken = _groups_of_step(session, job_id, step, TrainingGroupStatus.CONSUMED)
    return _claimed(session, job_id, step, taken)


def _claimed(session: Session, job_id: int, step: int, taken: list[TrainingGroup]) -> ClaimedStep:
    dropped = _groups_of_step(session, job_id, step, TrainingGroupStatus.DROPPED)
    flat = [g for g in dropped if (g.drop_reason or "").startswith(ZERO_VARIANCE)]
    return ClaimedStep(
        step,
        taken,
        _stale_count(session, job_id, step),
        dropped=len(dropped) - len(flat),
        masked=sum(group.masked_samples for group in [*taken, *dropped]),
        dropped_zero_variance=len(flat),
    )


def _groups_of_step(
    session: Session, job_id: int, step: int, status: TrainingGroupStatus
) -> list[TrainingGroup]:
    return list(
        session.scalars(
            select(TrainingGroup)
            .where(
                TrainingGroup.job_id == job_id,
                TrainingGroup.step == step,
                TrainingGroup.status == status.value,
            )
            .options(selectinload(TrainingGroup.samples))
            .order_by(TrainingGroup.id)
        )
    )


def round_groups(session: Session, *, job_id: int, round: int) -> dict[str, bool]:
    """The groups recorded for round `round`: context key -> whether it can be trained on
    (ready, consumed or stale; not dropped)."""
    rows = session.execute(
        select(TrainingGroup.context_key, TrainingGroup.status).where(
            TrainingGroup.job_id == job_id, TrainingGroup.round == round
        )
    )
    return {key: status != TrainingGroupStatus.DROPPED.value for key, status in rows}


def claimed_visits(
    session: Session, *, job_id: int, through_step: int
) -> dict[str, list[list[float]]]:
    """Per context key, its groups counted by steps up to `through_step` (trained, stale or
    dropped alike), oldest round first, each as its episodes' pass rates (an episode's
    last turn's). Groups with no samples (all masked) are no visit. Once that step is
    claimed these never change (`claim_step` marks groups only with the step it claims)."""
    rows = session.execute(
        select(
            TrainingGroup.context_key,
            TrainingGroup.id,
            TrainingSample.sample_index,
            TrainingSample.pass_rate,
        )
        .join(TrainingSample, TrainingSample.group_id == TrainingGroup.id)
        .where(TrainingGroup.job_id == job_id, TrainingGroup.step <= through_step)
        .order_by(
            TrainingGroup.round, TrainingGroup.id, TrainingSample.sample_index, TrainingSample.turn
        )
    )
    episodes: dict[tuple[str, int], dict[int, float]] = {}
    for key, group_id, index, pass_rate in rows:
        episodes.setdefault((key, group_id), {})[index] = float(pass_rate)  # last turn wins
    visits: dict[str, list[list[float]]] = {}
    for (key, _), rates in episodes.items():
        visits.setdefault(key, []).append(list(rates.values()))
    return visits


def step_was_claimed(session: Session, *, job_id: int, step: int) -> bool:
    """Whether some group was consumed by `step` of the job."""
    return 1 <= step <= _last_claimed_step(session, job_id)


def _last_claimed_step(session: Session, job_id: int) -> int:
    last = session.scalar(
        select(func.max(TrainingGroup.step)).where(
            TrainingGroup.job_id == job_id,
            TrainingGroup.status == TrainingGroupStatus.CONSUMED.value,
        )
    )
    return int(last or 0)


def _stale_count(session: Session, job_id: int, step: int) -> int:
    return int(
        session.scalar(
            select(func.count(TrainingGroup.id)).where(
                TrainingGroup.job_id == job_id,
                TrainingGroup.step == step,
                TrainingGroup.status == TrainingGroupStatus.STALE.value,
            )
        )
        or 0
    )


def group_counts(session: Session, *, job_id: int) -> dict[str, int]:
    """The job's groups per status: ready, consumed, stale, dropped (every one present)."""
    counts = {status.value: 0 for status in TrainingGroupStatus}
    rows = session.execute(
        select(TrainingGroup.status, func.count(TrainingGroup.id))
        .where(TrainingGroup.job_id == job_id)
        .group_by(TrainingGroup.status)
    )
    counts.update({status: int(count) for status, count in rows})
    return counts


def last_reports(session: Session, *, job_id: int) -> list[datetime | None]:
    """When the job's last step report and its newest group were written (None if none)."""
    return [
        session.scalar(
            select(func.max(TrainingStep.created_at)).where(TrainingStep.job_id == job_id)
        ),
        session.scalar(
            select(func.max(TrainingGroup.created_at)).where(TrainingGroup.job_id == job_id)
        ),
    ]


def step_groups(
    session: Session, *, job_id: int, step: int
) -> tuple[list[TrainingGroup], dict[int, str]]:
    """The groups step `step` consumed or dropped, in id order with their samples, and
    their problems' external ids by problem id."""
    groups = session.scalars(
        select(TrainingGroup)
        .where(TrainingGroup.job_id == job_id, TrainingGroup.step == step)
        .order_by(TrainingGroup.id)
        .options(selectinload(TrainingGroup.samples))
    ).all()
    names = session.execute(
        select(Problem.id, Problem.external_id).where(
            Problem.id.in_({g.problem_id for g in groups})
        )
    )
    return list(groups), dict(names.all())
