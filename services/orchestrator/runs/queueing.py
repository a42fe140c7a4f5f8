"""Getting a run's jobs done: on Redis through RQ, or in this process.

With `COBALT_REDIS_URL` set, each open problem of a run becomes one RQ job (id
`cobalt-run-<run>-problem-<problem>`, so enqueueing again replaces rather than doubles
it) on the `cobalt-rollouts` queue; `cobalt worker` processes on any machine take them.
RQ retries a failed or abandoned job (its worker died) `COBALT_JOB_RETRIES` times; the job
resumes from the turns already stored. Without Redis, the same job function runs in a
thread pool of this process: the embedded default for one machine.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

from cobalt.orchestrator.rollouts.jobs import run_problem_job
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.shared.clients import ExecutorClientSettings
from cobalt.shared.clients.local_executor import local_executor

__all__ = [
    "QUEUE_NAME",
    "enqueue_run",
    "job_executor",
    "job_id",
    "run_in_process",
    "worker_queue",
]

logger = logging.getLogger(__name__)

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


def enqueue_run(
    settings: OrchestratorSettings,
    run_id: int,
    problem_ids: Sequence[int],
    *,
    api_key: str | None,
) -> int:
    """Put one job per problem on the queue; returns how many were enqueued."""
    from rq import Queue, Retry

    queue = worker_queue(settings)
    assert isinstance(queue, Queue)
    intervals = [10, 30, 60][: max(1, settings.job_retries)]
    for problem_id in problem_ids:
        queue.enqueue(
            run_problem_job,
            run_id,
            problem_id,
            api_key=api_key,
            job_id=job_id(run_id, problem_id),
            retry=Retry(max=settings.job_retries, interval=intervals)
            if settings.job_retries
            else None,
            job_timeout=settings.job_timeout_s,
            result_ttl=24 * 3600,
            failure_ttl=7 * 24 * 3600,
        )
    return len(problem_ids)


@contextlib.contextmanager
def job_executor() -> Iterator[tuple[str, str | None]]:
    """(URL, token) of COBALT_EXECUTOR_URL's executor, or of a local one started for now."""
    settings = ExecutorClientSettings()
    if settings.url:
        token = settings.auth_token
        yield settings.url, token.get_secret_value() if token else None
        return
    with local_executor() as local:
        yield local.base_url, local.token


def run_in_process(
    settings: OrchestratorSettings,
    run_id: int,
    problem_ids: Sequence[int],
    *,
    api_key: str | None,
    executor: tuple[str, str | None],
    on_job_done: Callable[[int, BaseException | None], None] | None = None,
) -> list[tuple[int, BaseException]]:
    """Run the jobs here, `settings.local_concurrency` at a time, on `executor` (URL, token).

    Returns the (problem, error) failures.
    """
    failures: list[tuple[int, BaseException]] = []
    workers = max(1, settings.local_concurrency)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout") as pool:
        futures = {
            pool.submit(
                run_problem_job,
                run_id,
                problem_id,
                api_key=api_key,
                executor_url=executor[0],
                executor_token=executor[1],
                database_url=settings.database_url,
            ): problem_id
            for problem_id in problem_ids
        }
        for future in as_completed(futures):
            error = future.exception()
            if error is not None:
                failures.append((futures[future], error))
                logger.warning("problem %d of run %d failed: %s", futures[future], run_id, error)
            if on_job_done is not None:
                on_job_done(futures[future], error)
    return failures
