"""The rollout queue on Redis (RQ): what goes on it and under which ids.

With `COBALT_REDIS_URL` set, each open problem of a run becomes one RQ job (id
`cobalt-run-<run>-problem-<problem>`, so enqueueing again replaces rather than doubles
it), and each context of a training round one more (`training.jobs.rq_job_id`), on the
`cobalt-rollouts` queue; `cobalt worker` processes on any machine take them. RQ retries a
failed or abandoned job (its worker died) `COBALT_JOB_RETRIES` times; the job resumes from
what is already stored. Without Redis the same job functions run in this process
(`worker.in_process`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cobalt.orchestrator.rollouts.jobs import run_problem_job
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.runtime import JobConnections

__all__ = [
    "QUEUE_NAME",
    "RETRY_INTERVALS_S",
    "enqueue_job",
    "enqueue_run",
    "job_id",
    "worker_queue",
]

QUEUE_NAME = "cobalt-rollouts"


def job_id(run_id: int, problem_id: int) -> str:
    return f"cobalt-run-{run_id}-problem-{problem_id}"


def worker_queue(settings: OrchestratorSettings) -> object:
    """The RQ queue named by the settings (requires COBALT_REDIS_URL)."""
    from redis import Redis
    from rq import Queue

    if not settings.redis_url:
        raise ValueError("COBALT_REDIS_URL is not set: there is no queue to use")
    return Queue(QUEUE_NAME, connection=Redis.from_url(settings.redis_url))


RETRY_INTERVALS_S = (10, 30, 60)
"""Waits before a rollout job's retries (RQ retries up to COBALT_JOB_RETRIES times)."""


def enqueue_job(
    settings: OrchestratorSettings,
    function: Callable[..., object],
    args: tuple[object, ...],
    kwargs: dict[str, object],
    *,
    job_id: str,
    retry_intervals: Sequence[int] | None = None,
) -> None:
    """Put one call of `function` (importable by name) on the queue under `job_id`, so
    that enqueueing it again replaces rather than doubles it."""
    from rq import Queue, Retry

    queue = worker_queue(settings)
    assert isinstance(queue, Queue)
    retry = None
    if settings.job_retries:
        retry = Retry(max=settings.job_retries, interval=list(retry_intervals or [0]))
    queue.enqueue(
        function,
        *args,
        **kwargs,
        job_id=job_id,
        retry=retry,
        job_timeout=settings.job_timeout_s,
        result_ttl=24 * 3600,
        failure_ttl=7 * 24 * 3600,
    )


def enqueue_run(
    settings: OrchestratorSettings,
    run_id: int,
    problem_ids: Sequence[int],
    *,
    api_key: str | None,
) -> int:
    """Put one job per problem on the queue; returns how many were enqueued."""
    intervals = RETRY_INTERVALS_S[: max(1, settings.job_retries)]
    for problem_id in problem_ids:
        enqueue_job(
            settings,
            run_problem_job,
            (run_id, problem_id),
            {"connections": JobConnections(api_key=api_key)},
            job_id=job_id(run_id, problem_id),
            retry_intervals=intervals,
        )
    return len(problem_ids)
