"""The unit of training rollout work: one context's group for one round.

`roll_out_training_group` loads the context and its problem, samples and scores the group
(`rollout.roll_out_group`, or an episode mode's loop) and writes it to the ledger in one
transaction. The ledger's unique key (job, context, round) makes a retried job harmless. A group
sampled by a server already further behind the job's reported policy version than
`max_staleness` (a server restarted on its base weights) is not recorded: it could never
be trained on, and would hold its slot for good; the job fails and is rolled out again.

Infrastructure errors are not rewards: responses the sandbox failed to judge are masked by
the scorer; a group left with fewer than two is written as `dropped` with its reason, and
once the job's masked share passes its `error_budget` the job fails with an error naming
the executor and the counts, instead of training on a broken judge. A job with
`filter_zero_variance` records a group whose responses all got the same reward as
`dropped` too (reason `zero_variance`, its samples kept): its round is refilled
(`training.selection`).
It takes what it uses as arguments; queueing it, running it in this process and waking
the trainer are `worker`'s business.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.lifecycle import JobEvent
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
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
    stored_training_params,
)
from cobalt.shared.errors import InvalidInput, NotFound, Unavailable
from cobalt.shared.reward import TokenizerCounter

__all__ = ["budget_error", "feedback_template", "roll_out_training_group"]


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
    """Roll out, score and record the group of one context for one round.

    Returns {"group_id": the new group's id, or None when it was already recorded or the
    job is stopped, "samples": how many were written}.
    """
    with sessions() as session:
        job = repo_training.get_job(session, job_id=job_id)
        if job.status in (
            TrainingJobStatus.STOPPED,
            TrainingJobStatus.FINISHED,
            TrainingJobStatus.FAILED,
        ):
            logger.info("training job %d is %s; round %d skipped", job_id, job.status, round)
            return {"group_id": None, "samples": 0}
        params = stored_training_params(job.mode, job.params)
        context = session.get(BanditContext, context_id)
        problem = session.get(Problem, context.problem_id) if context is not None else None
        if context is None or problem is None:
            raise NotFound(f"context {context_id} of training job {job_id} no longer exists")
        row = ProblemRow.model_validate(problem, from_attributes=True)
        group_context = GroupContext(
            context_key=context_key(context.id),
            problem_id=problem.id,
            messages=list(context.messages),
            prev_best=context.prev_best,
            tests=[*row.public_tests, *row.hidden_tests],
            public_count=len(row.public_tests),
        )
        template = None
        if isinstance(params, EpisodeParams):
            template = feedback_template(session, params, context)
        scheduled_version, model_dir = job.policy_version, job.model
    endpoint = ModelEndpoint(
        base_url=params.base_url,
        model=params.served_model,
        api_key=api_key,
    )
    sampling = SamplingParams.of(
        params, n=params.trainer.n_samples, max_tokens=params.trainer.max_response_tokens
    )
    tokens = _token_counter(model_dir)

    async def roll_out() -> ScoredGroup:
        sampler: ChatSampler
        if params.replicas:
            # One replica per context, the same every round: its prefix cache holds it.
            group_key = f"job-{job_id}/{group_context.context_key}"
            sampler = await runtime.replica_sampler(endpoint, params.replicas, group_key)
        else:
            sampler = await runtime.sampler(endpoint)
        rollout = GroupRollout(
            context=group_context,
            sampler=sampler,
            executor=await runtime.executor_client(executor),
            tokens=tokens,
            sampling=sampling,
            template=template,
        )
        return await score_group(rollout, params)

    group = runtime.run(roll_out)
    version = group.policy_version if group.policy_version is not None else scheduled_version
    if is_stale(
        current_version=scheduled_version,
        sampled_version=version,
        max_staleness=params.max_staleness,
    ):
        # Stale on arrival: every claim from now on would expire it, and its (context,
        # round) slot would never be sampled again. Not recorded; the job fails and is
        # retried (RQ, then the trainer's round retry) once the trainer has loaded the
        # current weights into the server (its catch-up).
        raise Unavailable(
            f"the inference service served policy version {version}, "
            f"behind training job {job_id}'s version {scheduled_version} by more than its "
            f"max_staleness {params.max_staleness} (restarted on its base weights?); the "
            f"group of context {context_id}, round {round} is not recorded and is rolled "
            "out again"
        )
    key: dict[str, Any] = {
        "job_id": job_id,
        "context_key": group_context.context_key,
        "round": round,
        "problem_id": group_context.problem_id,
        "policy_version": version,
        "phase_seconds": group.seconds,
        "masked_samples": group.masked,
    }
    with sessions.begin() as session:
        if group.masked:
            # The job's row first: a group's insert share-locks it (its foreign key), so
            # locking it after would deadlock two groups judging the budget at once.
            job = repo_training.get_job(session, job_id=job_id, for_update=True)
        flat = params.filter_zero_variance and group.trainable and _zero_variance(group)
        if flat:
            reason = f"{ZERO_VARIANCE}: every response got reward {group.samples[0].reward.total:g}"
            repo_training.record_group(session, samples=group.samples, drop_reason=reason, **key)
            group_id = None
        elif group.trainable:
            group_id = repo_training.record_group(session, samples=group.samples, **key)
        else:
            reason = (
                f"sandbox errors: {group.masked} of {sampling.n} responses masked, fewer than "
                "two judged ones left for a GRPO baseline"
            )
            repo_training.record_dropped_group(session, reason=reason, **key)
            group_id = None
        if group.masked:
            masked, sampled = repo_training.masked_share(
                session, job_id=job_id, group_size=sampling.n
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
    logger.info(
        "training job %d round %d context %d: group %s at policy version %d",
        job_id,
        round,
        context_id,
        group_id,
        version,
    )
    return {"group_id": group_id, "samples": len(group.samples) if group_id else 0}
