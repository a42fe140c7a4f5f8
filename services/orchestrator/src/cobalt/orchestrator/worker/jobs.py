"""The worker's entry points, one per kind of work: `run_problem` (one problem of a run)
and `run_group` (one context's group of a training round).

Each resolves what a job uses once (`JobResources`: the database, the rollout runtime,
the executor, the model's API key) and calls one domain function that takes those as
arguments (`runs.jobs.roll_out_run_problem`, `training.jobs.roll_out_training_group`).
A job taken off the queue gets them from the process's job context (`worker.runtime`);
the in-process runner passes them. `work_for_run` and `work_for_round` name the calls
that carry out a run or a round, whichever way they are then carried out
(`worker.carry_out`).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.rollouts.runtime import JobInterrupted, RolloutRuntime
from cobalt.orchestrator.runs.jobs import reopen_problem, roll_out_run_problem
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.training.jobs import roll_out_training_group
from cobalt.orchestrator.training.service import due_refill
from cobalt.orchestrator.worker.runtime import job_context, runtime, sessions_for
from cobalt.shared.clients import ExecutorAddress
from cobalt.shared.contracts.training import GROUP_LIST_MAX, group_list_key
from cobalt.shared.errors import Unavailable

__all__ = [
    "JobResources",
    "Work",
    "run_group",
    "run_problem",
    "work_for_round",
    "work_for_run",
]

_Result = TypeVar("_Result")

logger = logging.getLogger(__name__)

RUN_RETRY_INTERVALS_S = (10, 30, 60)
"""Waits before a run job's retries (RQ retries up to COBALT_JOB_RETRIES times)."""


@dataclass(frozen=True, slots=True)
class JobResources:
    """What one job uses, resolved once by its entry point."""

    settings: OrchestratorSettings
    sessions: sessionmaker[Session]
    runtime: RolloutRuntime
    executor: ExecutorAddress
    api_key: SecretStr | None

    @classmethod
    def here(
        cls, settings: OrchestratorSettings, executor: ExecutorAddress, api_key: str | None
    ) -> JobResources:
        """For jobs of this process, on `executor` and the settings' database."""
        return cls(
            settings=settings,
            sessions=sessions_for(settings.database_url),
            runtime=runtime(),
            executor=executor,
            api_key=SecretStr(api_key) if api_key else None,
        )

    @classmethod
    def of_process(cls, api_key: str | None) -> JobResources:
        """For a job taken off the queue: the process's job context decides."""
        context = job_context()
        if context.executor is None:
            raise Unavailable("no executor for this worker: set COBALT_EXECUTOR_URL")
        return cls.here(context.settings, context.executor, api_key)


def run_problem(
    run_id: int,
    problem_id: int,
    api_key: str | None = None,
    *,
    resources: JobResources | None = None,
) -> dict[str, int]:
    """One problem of one run (`runs.jobs.roll_out_run_problem`); a job off the queue holds
    its lease meanwhile, so run recovery (`worker.recovery`) knows a live worker has it.
    A job that fails while RQ will try it again leaves its trajectories pending, not
    failed: the run is not over (`runs.jobs.reopen_problem`)."""
    used = resources or JobResources.of_process(api_key)
    from cobalt.orchestrator.worker.recovery import held_lease  # it imports this module

    interval_s = used.settings.run_recovery_interval_s
    redis_url = used.settings.redis_url
    lease: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if resources is None and redis_url is not None and interval_s:  # a job off the queue
        lease = held_lease(redis_url, problem_queue_id(run_id, problem_id), interval_s)
    try:
        with lease:
            return _call(roll_out_run_problem, (run_id, problem_id), used)
    except JobInterrupted:
        raise
    except Exception:
        if _retried():
            try:
                reopen_problem(used.sessions, run_id, problem_id)
            except Exception as exc:  # noqa: BLE001  the database down too: they stay open
                logger.warning("run %d problem %d not reopened: %s", run_id, problem_id, exc)
        raise


def run_group(
    job_id: int,
    context_id: int,
    round: int,
    api_key: str | None = None,
    *,
    resources: JobResources | None = None,
) -> dict[str, int | None]:
    """One context's group of a training round (`training.jobs.roll_out_training_group`);
    with Redis, its id then goes on the job's list, so a waiting trainer wakes up, and a
    refill batch of the round that this group made due is queued (in this process,
    `carry_out.schedule_round` rolls the refills out itself)."""
    used = resources or JobResources.of_process(api_key)
    result = _call(roll_out_training_group, (job_id, context_id, round), used)
    group_id = result["group_id"]
    if group_id is not None and used.settings.redis_url:
        _wake_trainer(used.settings.redis_url, job_id, group_id)
    if used.settings.redis_url:
        refill = due_refill(used.sessions, job_id, round)
        if refill:
            from cobalt.orchestrator.worker import queue  # it imports this module

            queue.enqueue(used.settings, work_for_round(job_id, round, refill).values(), api_key)
    return result


def _call(body: Callable[..., _Result], args: tuple[int, ...], used: JobResources) -> _Result:
    """The domain function with the job's resources; a job stopped with its process goes
    back on the queue."""
    try:
        return body(
            *args,
            sessions=used.sessions,
            runtime=used.runtime,
            executor=used.executor,
            api_key=used.api_key,
        )
    except JobInterrupted:
        _keep_retry()
        raise


def _wake_trainer(redis_url: str, job_id: int, group_id: int) -> None:
    from redis import Redis

    key = group_list_key(job_id)
    with Redis.from_url(redis_url) as redis, redis.pipeline() as pipe:
        pipe.rpush(key, group_id)
        pipe.ltrim(key, -GROUP_LIST_MAX, -1)
        pipe.execute()


def _retried() -> bool:
    """Whether RQ will try the job failing now again (it has retries left)."""
    from rq import get_current_job

    job = get_current_job()
    return job is not None and (job.retries_left or 0) > 0


def _keep_retry() -> None:
    """Under RQ, the job failing now goes back on the queue without spending a retry: its
    worker was stopped (Ctrl-C, SIGTERM), the job did nothing wrong, and with no retry
    left it would otherwise be dropped while its trajectories wait as pending."""
    from rq import get_current_job

    job = get_current_job()
    if job is not None:
        job.retries_left = (job.retries_left or 0) + 1


@dataclass(frozen=True, slots=True)
class Work:
    """One call of an entry point, as the queue or this process's pool takes it."""

    function: Callable[..., dict[str, Any]]
    args: tuple[int, ...]
    queue_id: str
    """Its RQ job id: enqueueing it again replaces rather than doubles it."""
    retry_intervals_s: Sequence[int] | None = None


def problem_queue_id(run_id: int, problem_id: int) -> str:
    return f"cobalt-run-{run_id}-problem-{problem_id}"


def group_queue_id(job_id: int, round: int, context_id: int) -> str:
    return f"cobalt-train-{job_id}-{round}-{context_id}"


def work_for_run(run_id: int, problem_ids: Iterable[int]) -> dict[int, Work]:
    """One job per open problem of a run."""
    return {
        problem_id: Work(
            run_problem,
            (run_id, problem_id),
            problem_queue_id(run_id, problem_id),
            RUN_RETRY_INTERVALS_S,
        )
        for problem_id in problem_ids
    }


def work_for_round(job_id: int, round: int, context_ids: Iterable[int]) -> dict[int, Work]:
    """One job per context of a training round (a small dataset wraps: one job each)."""
    return {
        context_id: Work(
            run_group, (job_id, context_id, round), group_queue_id(job_id, round, context_id)
        )
        for context_id in dict.fromkeys(context_ids)
    }
