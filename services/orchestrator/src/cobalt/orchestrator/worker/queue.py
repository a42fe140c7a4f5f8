"""The rollout queue on Redis (RQ): what goes on it and under which ids.

With `COBALT_REDIS_URL` set, each open problem of a run becomes one RQ job (id
`cobalt-run-<run>-problem-<problem>`, so enqueueing again replaces rather than doubles
it), and each context of a training round one more (`cobalt-train-<job>-<round>-<context>`),
on the `cobalt-rollouts` queue; `cobalt worker` processes on any machine take them. RQ
retries a failed or abandoned job (its worker died) `COBALT_JOB_RETRIES` times; the job
resumes from what is already stored. Without Redis the same entry points run in this
process (`worker.in_process`).
"""

from __future__ import annotations

from collections.abc import Collection

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.jobs import Work
from cobalt.shared.errors import Unavailable

__all__ = ["QUEUE_NAME", "enqueue", "worker_queue"]

QUEUE_NAME = "cobalt-rollouts"


def worker_queue(settings: OrchestratorSettings) -> object:
    """The RQ queue named by the settings (requires COBALT_REDIS_URL)."""
    from redis import Redis
    from rq import Queue

    if not settings.redis_url:
        raise ValueError("COBALT_REDIS_URL is not set: there is no queue to use")
    return Queue(QUEUE_NAME, connection=Redis.from_url(settings.redis_url))


def enqueue(settings: OrchestratorSettings, work: Collection[Work], api_key: str | None) -> int:
    """Put each call on the queue under its id; returns how many were enqueued. The model's
    API key travels with the job (in Redis), never into the database.

    Raises:
        Unavailable: Redis cannot be reached (restarting, loading its data): nothing is
            lost, the database holds the work; asking again enqueues it (same ids).
    """
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    from rq import Queue, Retry

    queue = worker_queue(settings)
    assert isinstance(queue, Queue)
    try:
        with queue.connection:
            for call in work:
                retry = None
                if settings.job_retries:
                    intervals = list(call.retry_intervals_s or [0])[: max(1, settings.job_retries)]
                    retry = Retry(max=settings.job_retries, interval=intervals)
                queue.enqueue(
                    call.function,
                    *call.args,
                    api_key=api_key,
                    job_id=call.queue_id,
                    retry=retry,
                    job_timeout=settings.job_timeout_s,
                    result_ttl=24 * 3600,
                    failure_ttl=7 * 24 * 3600,
                )
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise Unavailable(
            f"the rollout queue (Redis, COBALT_REDIS_URL) is unreachable: {exc}; nothing "
            "was lost, retry shortly"
        ) from exc
    return len(work)
