"""The unit of training rollout work: one context's group for one round, and its scheduling.

`run_group_job` is what a rollout worker (`cobalt worker`) runs from the queue, or a
thread of this process runs without Redis: load the context and its problem, sample and
score the group (`rollout.roll_out_group`), write it to the ledger in one transaction, and
push its id on the job's Redis list so a waiting trainer wakes up. The ledger's unique key
(job, context, round) makes a retried job harmless, and the RQ job id
`cobalt-train-<job>-<round>-<context>` keeps one round from being queued twice.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from sqlalchemy.orm import Session

from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.sampling import SamplingParams
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store import repo_training
from cobalt.orchestrator.store.models import (
    BanditContext,
    Problem,
    Run,
    TrainingJobStatus,
)
from cobalt.orchestrator.training.episodes import EpisodeSpec, roll_out_episodes
from cobalt.orchestrator.training.rollout import GroupContext, ScoredGroup, roll_out_group
from cobalt.orchestrator.training.service import (
    EPISODE_MODES,
    JobParams,
    context_ids_for_round,
)
from cobalt.orchestrator.training.verpo import roll_out_verpo_episodes
from cobalt.orchestrator.worker.in_process import run_here
from cobalt.orchestrator.worker.queue import enqueue_job
from cobalt.orchestrator.worker.runtime import (
    JobConnections,
    job_resources,
    runtime,
    sessions_for,
)
from cobalt.shared.clients import ModelEndpoint
from cobalt.shared.contracts import ProblemRow
from cobalt.shared.contracts.training import GROUP_LIST_MAX, TrainingMode, group_list_key
from cobalt.shared.errors import InvalidInput, NotFound
from cobalt.shared.reward import TokenizerCounter

__all__ = ["feedback_template", "rq_job_id", "run_group_job", "schedule_round"]

logger = logging.getLogger(__name__)


def rq_job_id(job_id: int, round: int, context_id: int) -> str:
    return f"cobalt-train-{job_id}-{round}-{context_id}"


@functools.lru_cache(maxsize=4)
def _token_counter(model_dir: str) -> TokenizerCounter:
    """The policy's tokenizer, read once per process (rewards count with it)."""
    return TokenizerCounter.from_path(model_dir)


def feedback_template(
    session: Session, params: JobParams, context: BanditContext
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


def run_group_job(
    job_id: int,
    context_id: int,
    round: int,
    connections: JobConnections | None = None,
) -> dict[str, int | None]:
    """Roll out, score and record the group of one context for one round.

    Returns {"group_id": the new group's id, or None when it was already recorded or the
    job is stopped, "samples": how many were written}.
    """
    resources = job_resources(connections)
    settings, sessions = resources.settings, resources.sessions
    executor_url, executor_token = resources.executor_url, resources.executor_token
    with sessions() as session:
        job = repo_training.get_job(session, job_id=job_id)
        if job.status in (TrainingJobStatus.STOPPED, TrainingJobStatus.FINISHED):
            logger.info("training job %d is %s; round %d skipped", job_id, job.status, round)
            return {"group_id": None, "samples": 0}
        params = JobParams.model_validate(job.params)
        context = session.get(BanditContext, context_id)
        problem = session.get(Problem, context.problem_id) if context is not None else None
        if context is None or problem is None:
            raise NotFound(f"context {context_id} of training job {job_id} no longer exists")
        row = ProblemRow.model_validate(problem, from_attributes=True)
        group_context = GroupContext(
            context_key=f"bandit:{context.id}",
            problem_id=problem.id,
            messages=list(context.messages),
            prev_best=context.prev_best,
            tests=[*row.public_tests, *row.hidden_tests],
            public_count=len(row.public_tests),
        )
        mode = TrainingMode(job.mode)
        episodic = mode in EPISODE_MODES
        template = feedback_template(session, params, context) if episodic else None
        scheduled_version, model_dir = job.policy_version, job.model
    endpoint = ModelEndpoint(
        base_url=params.base_url,
        model=params.served_model,
        api_key=resources.api_key,
    )
    sampling = SamplingParams(
        n=params.trainer.n_samples,
        temperature=params.temperature,
        top_p=params.top_p,
        max_tokens=params.trainer.max_response_tokens,
        seed=params.seed,
    )
    tokens = _token_counter(model_dir)
    spec = EpisodeSpec(
        turns=params.turns, stop_on_pass=params.stop_on_pass, think_cap_chars=params.think_cap_chars
    )

    async def roll_out() -> ScoredGroup:
        sampler = await runtime().sampler(endpoint)
        executor = await runtime().executor_client(executor_url, executor_token)
        if template is not None and mode == TrainingMode.VERPO:
            return await roll_out_verpo_episodes(
                group_context,
                sampler=sampler,
                executor=executor,
                params=sampling,
                template=template,
                spec=spec,
                outcome_weight=params.verpo_outcome_weight,
            )
        if template is not None:
            return await roll_out_episodes(
                group_context,
                sampler=sampler,
                executor=executor,
                tokens=tokens,
                params=sampling,
                template=template,
                spec=spec,
                reward_format=params.reward_format,
            )
        return await roll_out_group(
            group_context,
            sampler=sampler,
            executor=executor,
            tokens=tokens,
            params=sampling,
            reward_format=params.reward_format,
        )

    group = runtime().run(roll_out)
    version = group.policy_version if group.policy_version is not None else scheduled_version
    with sessions.begin() as session:
        group_id = repo_training.record_group(
            session,
            job_id=job_id,
            context_key=group_context.context_key,
            round=round,
            problem_id=group_context.problem_id,
            policy_version=version,
            samples=group.samples,
            phase_seconds=group.seconds,
        )
    if group_id is not None and settings.redis_url:
        from redis import Redis

        key = group_list_key(job_id)
        with Redis.from_url(settings.redis_url) as redis, redis.pipeline() as pipe:
            pipe.rpush(key, group_id)
            pipe.ltrim(key, -GROUP_LIST_MAX, -1)
            pipe.execute()
    logger.info(
        "training job %d round %d context %d: group %s at policy version %d",
        job_id, round, context_id, group_id, version,
    )  # fmt: skip
    return {"group_id": group_id, "samples": len(group.samples) if group_id else 0}


def schedule_round(
    settings: OrchestratorSettings,
    job_id: int,
    round: int,
    *,
    api_key: str | None = None,
    executor: tuple[str, str | None] | None = None,
) -> list[int]:
    """Queue the round's groups (with Redis), or roll them out here and wait.

    Returns the round's context ids. In-process failures are re-raised after every group
    has had its try, so a round is never left half done silently.
    """
    sessions = sessions_for(settings.database_url)
    with sessions() as session:
        context_ids = context_ids_for_round(session, job_id=job_id, round=round)
    if settings.redis_url:
        _enqueue(settings, job_id, round, context_ids, api_key=api_key)
        return context_ids
    url, token = executor or (None, None)
    failures = _run_here(settings, job_id, round, context_ids, api_key, url, token)
    if failures:
        raise failures[0]
    return context_ids


def _enqueue(
    settings: OrchestratorSettings,
    job_id: int,
    round: int,
    context_ids: Sequence[int],
    *,
    api_key: str | None,
) -> None:
    for context_id in dict.fromkeys(context_ids):  # a small dataset wraps: one job each
        enqueue_job(
            settings,
            run_group_job,
            (job_id, context_id, round),
            {"connections": JobConnections(api_key=api_key)},
            job_id=rq_job_id(job_id, round, context_id),
        )


def _run_here(
    settings: OrchestratorSettings,
    job_id: int,
    round: int,
    context_ids: Sequence[int],
    api_key: str | None,
    url: str | None,
    token: str | None,
) -> list[BaseException]:
    jobs = {
        context_id: functools.partial(
            run_group_job,
            job_id,
            context_id,
            round,
            JobConnections(
                api_key=api_key,
                executor_url=url,
                executor_token=token,
                database_url=settings.database_url,
            ),
        )
        for context_id in dict.fromkeys(context_ids)
    }
    failures = run_here(settings, jobs)
    for _, error in failures:
        logger.warning("training job %d round %d: a group failed: %s", job_id, round, error)
    return [error for _, error in failures]
