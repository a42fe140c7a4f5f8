"""The unit of training rollout work: one context's group for one round.

`roll_out_training_group` reads in four phases: load the context and its problem
(`_load`), sample and score the group (`_roll_out`: `rollout.roll_out_group`, or an episode
mode's loop), refuse it if stale on arrival (`_fresh_version`), decide its outcome from
its rewards alone (`group_outcome`, pure) and write it to the ledger in one transaction
(`_record`). The ledger's unique key (job, context, round) makes a retried job harmless.
A group sampled by a server already outside the job's off-policy window
(`staleness.is_stale` against the job's reported policy version: a server restarted on
its base weights) is not recorded: it could never be trained on, and would hold its slot
for good; the job fails and is rolled out again.

Infrastructure errors are not rewards: responses the sandbox failed to judge are masked by
the scorer; a group left with fewer than two is written as `dropped` with its reason, and
once the job's masked share passes its `error_budget` the job fails with an error naming
the executor and the counts, instead of training on a broken judge. A job with
`filter_zero_variance` records a group whose responses all got the same reward as
`dropped` too (reason `zero_variance`, its samples kept): its round is refilled
(`training.selection`). It takes what it uses as arguments; queueing it, running it in
this process and waking the trainer are `worker`'s business.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import asdict, dataclass, replace
from typing import Any

from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.lifecycle import JobEvent
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.request_seeds import request_seed
from cobalt.orchestrator.rollouts.runtime import RolloutRuntime
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams
from cobalt.orchestrator.store import repo_training
from cobalt.orchestrator.store.models import (
    BanditContext,
    Problem,
    Run,
    TrainingJobStatus,
)
from cobalt.orchestrator.store.repo_training import ZERO_VARIANCE
from cobalt.orchestrator.training.rollout import GroupContext, ScoredGroup
from cobalt.orchestrator.training.scorers import GroupRollout, score_group
from cobalt.orchestrator.training.selection import is_zero_variance
from cobalt.orchestrator.training.service import context_key
from cobalt.orchestrator.training.staleness import is_stale
from cobalt.shared.clients import ExecutorAddress, ModelEndpoint
from cobalt.shared.contracts import ProblemRow
from cobalt.shared.contracts.training_params import (
    EpisodeParams,
    TrainingParams,
)
from cobalt.shared.errors import InvalidInput, NotFound, Unavailable
from cobalt.shared.reward import TokenizerCounter

__all__ = [
    "GroupOutcome",
    "budget_error",
    "feedback_template",
    "group_outcome",
    "roll_out_training_group",
]


def budget_error(
    masked: int, sampled: int, budget: float, executor_url: str, *, judged_from: int
) -> str | None:
    """The job's error once `masked` of `sampled` responses passes `budget`; else None.

    The share is judged once `judged_from` responses were sampled (one step's worth): one
    masked response in the first group is not yet a broken judge.
    """
    if sampled < judged_from or masked <= budget * sampled:
        return None
    return (
        f"the executor at {executor_url} failed to judge {masked} of {sampled} sampled "
        f"responses ({masked / sampled:.1%}, error_budget {budget:.1%}): the job stopped "
        "rather than train on a broken judge; check the executor, then resume the job"
    )


logger = logging.getLogger(__name__)


@functools.lru_cache(maxsize=4)
def _token_counter(model_dir: str) -> TokenizerCounter:
    """The policy's tokenizer, read once per process (rewards count with it)."""
    return TokenizerCounter.from_path(model_dir)


def feedback_template(
    session: Session, params: EpisodeParams, context: BanditContext
) -> PromptTemplate:
    """The wording of a multi-turn episode's feedback: the job's `template`, or the one the
    context's source run used (checked against the hash the context recorded).

    Raises:
        NotFound: the source run is gone and the job names no template.
        InvalidInput: that template's file changed since the contexts were built.
    """
    if params.template is not None:
        return PromptTemplate.load(params.template)
    run = session.get(Run, context.source_run_id)
    if run is None:
        raise NotFound(
            f"run {context.source_run_id}, whose template the contexts used, no longer exists; "
            "give the job a `template`"
        )
    template = PromptTemplate.load(run.template_name)
    if template.sha256 != context.template_sha256:
        raise InvalidInput(
            f"template {run.template_name!r} changed since bandit context {context.id} was "
            "built; give the job a `template` explicitly"
        )
    return template


def _zero_variance(group: ScoredGroup) -> bool:
    """Whether the group's episodes all got one reward (an episode's turns share it)."""
    return is_zero_variance(list({s.sample_index: s.reward.total for s in group.samples}.values()))


@dataclass(frozen=True, slots=True)
class _Loaded:
    """What one group's rollout reads from the store, before any model call."""

    params: TrainingParams
    context: GroupContext
    template: PromptTemplate | None
    scheduled_version: int
    """The job's policy version when the group was loaded."""
    model_dir: str


@dataclass(frozen=True, slots=True)
class _GroupKey:
    """The ledger's key of one group (its unique key: job, context, round) and its problem."""

    job_id: int
    context_key: str
    round: int
    problem_id: int


@dataclass(frozen=True, slots=True)
class GroupOutcome:
    """What a scored group becomes in the ledger (`group_outcome`)."""

    trained: bool
    """Recorded `ready` to train on; otherwise recorded `dropped` with `drop_reason`."""
    drop_reason: str | None = None
    samples_kept: bool = True
    """A dropped group's samples are kept for the record (zero variance), or not (masked)."""


def group_outcome(params: TrainingParams, group: ScoredGroup, group_size: int) -> GroupOutcome:
    """A scored group's fate, from the job's settings and its rewards alone: trained on,
    dropped for zero variance (samples kept), or dropped for sandbox errors."""
    if not group.trainable:
        reason = (
            f"sandbox errors: {group.masked} of {group_size} responses masked, fewer than "
            "two judged ones left for a GRPO baseline"
        )
        return GroupOutcome(trained=False, drop_reason=reason, samples_kept=False)
    if params.filter_zero_variance and _zero_variance(group):
        total = group.samples[0].reward.total
        return GroupOutcome(
            trained=False, drop_reason=f"{ZERO_VARIANCE}: every response got reward {total:g}"
        )
    return GroupOutcome(trained=True)


def roll_out_training_group(
    job_id: int,
    context_id: int,
    round: int,
    *,
    sessions: sessionmaker[Session],
    runtime: RolloutRuntime,
    executor: ExecutorAddress,
    api_key: SecretStr | None,
) -> dict[str, int | None]:
    """Roll out, score and record the group of one context for one round: load, roll out,
    refuse it if stale on arrival, decide its outcome, record it.

    Returns {"group_id": the new group's id, or None when it was already recorded, dropped
    or the job is stopped, "samples": how many were written to train on}.
    """
    loaded = _load(sessions, job_id, context_id)
    if loaded is None:
        logger.info(
            "training job %d is stopped, finished or failed; round %d skipped", job_id, round
        )
        return {"group_id": None, "samples": 0}
    params = loaded.params
    sampling = SamplingParams.of(
        params, n=params.trainer.n_samples, max_tokens=params.trainer.max_response_tokens
    )
    if sampling.seed is not None:  # each group its own numbers, not the job's seed each time
        group_seed = request_seed(sampling.seed, loaded.context.context_key, round)
        sampling = replace(sampling, seed=group_seed)
    group = _roll_out(loaded, sampling, job_id, runtime, executor, api_key)
    version = _fresh_version(loaded, group, job_id=job_id, context_id=context_id, round=round)
    outcome = group_outcome(params, group, sampling.n)
    key = _GroupKey(job_id, loaded.context.context_key, round, loaded.context.problem_id)
    group_id = _record(sessions, params, key, version, group, outcome, executor)
    logger.info(
        "training job %d round %d context %d: group %s at policy version %d",
        job_id,
        round,
        context_id,
        group_id,
        version,
    )
    return {"group_id": group_id, "samples": len(group.samples) if group_id else 0}


def _fresh_version(
    loaded: _Loaded, group: ScoredGroup, *, job_id: int, context_id: int, round: int
) -> int:
    """The policy version that sampled `group` (the job's, from an endpoint that does not
    say), once it is known not to be stale on arrival (`staleness.is_stale`).

    Raises:
        Unavailable: it is. Every claim from now on would expire it, and its (context,
            round) slot would never be sampled again; so it is not recorded, the job fails
            and is retried (RQ, then the recovery sweep) once the trainer has loaded the
            current weights into the server (its catch-up).
    """
    current = loaded.scheduled_version
    version = group.policy_version if group.policy_version is not None else current
    window = loaded.params.max_staleness
    if is_stale(current_version=current, sampled_version=version, max_staleness=window):
        raise Unavailable(
            f"the inference service served policy version {version}, "
            f"behind training job {job_id}'s version {current} by more than its "
            f"max_staleness {window} (restarted on its base weights?); the group of "
            f"context {context_id}, round {round} is not recorded and is rolled out again"
        )
    return version


def _load(sessions: sessionmaker[Session], job_id: int, context_id: int) -> _Loaded | None:
    """The job's settings, the context with its problem's tests and the feedback template;
    None when the job is stopped, finished or failed.

    Raises:
        NotFound: the context or its problem is gone.
    """
    with sessions() as session:
        job = repo_training.get_job(session, job_id=job_id)
        if job.status in (
            TrainingJobStatus.STOPPED,
            TrainingJobStatus.FINISHED,
            TrainingJobStatus.FAILED,
        ):
            return None
        params = job.params
        context = session.get(BanditContext, context_id)
        problem = session.get(Problem, context.problem_id) if context is not None else None
        if context is None or problem is None:
            raise NotFound(f"context {context_id} of training job {job_id} no longer exists")
        row = ProblemRow.model_validate(problem, from_attributes=True)
        template = None
        if isinstance(params, EpisodeParams):
            template = feedback_template(session, params, context)
        return _Loaded(
            params=params,
            context=GroupContext(
                context_key=context_key(context.id),
                problem_id=problem.id,
                messages=list(context.messages),
                prev_best=context.prev_best,
                tests=[*row.public_tests, *row.hidden_tests],
                public_count=len(row.public_tests),
            ),
            template=template,
            scheduled_version=job.policy_version,
            model_dir=job.model,
        )


def _roll_out(
    loaded: _Loaded,
    sampling: SamplingParams,
    job_id: int,
    runtime: RolloutRuntime,
    executor: ExecutorAddress,
    api_key: SecretStr | None,
) -> ScoredGroup:
    """Sample the group and score it (the mode's scorer), on the runtime's loop."""
    params = loaded.params
    endpoint = ModelEndpoint(base_url=params.base_url, model=params.served_model, api_key=api_key)
    tokens = _token_counter(loaded.model_dir)

    async def roll_out() -> ScoredGroup:
        sampler: ChatSampler
        if params.replicas:
            # One replica per context, the same every round: its prefix cache holds it.
            group_key = f"job-{job_id}/{loaded.context.context_key}"
            sampler = await runtime.replica_sampler(endpoint, params.replicas, group_key)
        else:
            sampler = await runtime.sampler(endpoint)
        rollout = GroupRollout(
            context=loaded.context,
            sampler=sampler,
            executor=await runtime.executor_client(executor),
            tokens=tokens,
            sampling=sampling,
            template=loaded.template,
        )
        return await score_group(rollout, params)

    return runtime.run(roll_out)


def _record(
    sessions: sessionmaker[Session],
    params: TrainingParams,
    key: _GroupKey,
    version: int,
    group: ScoredGroup,
    outcome: GroupOutcome,
    executor: ExecutorAddress,
) -> int | None:
    """Write the group as its outcome says, in one transaction, and judge the job's error
    budget when responses were masked; returns the id of a group to train on."""
    job_id = key.job_id
    row: dict[str, Any] = {
        **asdict(key),
        "policy_version": version,
        "phase_seconds": group.seconds,
        "masked_samples": group.masked,
    }
    with sessions.begin() as session:
        if group.masked:
            # The job's row first: a group's insert share-locks it (its foreign key), so
            # locking it after would deadlock two groups judging the budget at once.
            job = repo_training.get_job(session, job_id=job_id, for_update=True)
        group_id = None
        if outcome.trained:
            group_id = repo_training.record_group(session, samples=group.samples, **row)
        elif outcome.samples_kept:
            repo_training.record_group(
                session, samples=group.samples, drop_reason=outcome.drop_reason, **row
            )
        else:
            repo_training.record_dropped_group(session, reason=str(outcome.drop_reason), **row)
        if group.masked:
            masked, sampled = repo_training.masked_share(
                session, job_id=job_id, group_size=params.trainer.n_samples
            )
            one_step = params.trainer.contexts_per_step * params.trainer.n_samples
            error = budget_error(
                masked, sampled, params.error_budget, executor.url, judged_from=one_step
            )
            done = (TrainingJobStatus.FAILED, TrainingJobStatus.FINISHED)
            if error is not None and job.status not in done:
                repo_training.apply_job_event(job, JobEvent.FAIL)
                job.error = error
                logger.error("training job %d: %s", job_id, error)
    return group_id
