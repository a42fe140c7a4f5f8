"""The queue carrier: work goes on the rollout queue on Redis (RQ) and `cobalt worker`
processes on any machine take it.

Each open problem of a run becomes one RQ job (id `cobalt-run-<run>-problem-<problem>`, so
enqueueing again replaces rather than doubles it), and each context of a training round one
more (`cobalt-train-<job>-<round>-<context>`), on the `cobalt-rollouts` queue. RQ retries a
failed or abandoned job (its worker died) `COBALT_JOB_RETRIES` times; the job resumes from
what is already stored, and run recovery (`worker.recovery`) queues again what the queue
lost. The other carrier runs the same entry points in this process (`worker.in_process`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.carrier_base import Calls, Carrier, Failures, OnDone
from cobalt.orchestrator.worker.lease import held_lease
from cobalt.orchestrator.worker.work import Work
from cobalt.shared.contracts.training import GROUP_LIST_MAX, group_list_key
from cobalt.shared.errors import Unavailable

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["QUEUE_NAME", "QueueCarrier", "enqueue"]

QUEUE_NAME = "cobalt-rollouts"

RESULT_TTL_S = 24 * 3600
"""How long RQ keeps a finished job's record (seconds)."""
FAILURE_TTL_S = 7 * 24 * 3600
"""How long RQ keeps a failed job's record and traceback (seconds)."""


class QueueCarrier(Carrier):
    """Carries work on the Redis queue: `carry` returns once it is enqueued."""

    queued = True

    def __init__(self, settings: OrchestratorSettings, redis_url: str) -> None:
        super().__init__(settings)
        self.redis_url = redis_url

    def connection(self, **options: float) -> Redis:
        """A new connection to the queue's Redis (the caller closes it)."""
        from redis import Redis

        return Redis.from_url(self.redis_url, **options)

    def _carry(self, work: Calls, api_key: str | None, on_done: OnDone) -> Failures:
        """Put each call on the queue under its id (no failures to report: workers take
        them). The model's API key travels with the job (in Redis), never into the database.

        Raises:
            Unavailable: Redis cannot be reached (restarting, loading its data): nothing is
                lost, the database holds the work; asking again enqueues it (same ids).
        """
        with self.connection() as connection:
            enqueue(self.settings, connection, work.values(), api_key)
        return []

    def holding(self, work: Work) -> contextlib.AbstractContextManager[None]:
        """Hold the work's lease while its job runs (`worker.lease`)."""
        interval_s = self.settings.run_recovery_interval_s
        if not interval_s:
            return contextlib.nullcontext()
        return held_lease(self.redis_url, work.queue_id, interval_s)

    def group_recorded(self, job_id: int, group_id: int) -> None:
        """Put the group's id on the job's list, so a waiting trainer wakes up."""
        key = group_list_key(job_id)
        with self.connection() as redis, redis.pipeline() as pipe:
            pipe.rpush(key, group_id)
            pipe.ltrim(key, -GROUP_LIST_MAX, -1)
            pipe.execute()


def enqueue(
    settings: OrchestratorSettings, connection: Redis, work: Iterable[Work], api_key: str | None
) -> None:
    """Put each call on the queue of `connection` under its id (`QueueCarrier.carry`)."""
    from redis.exceptions import ConnectionError as RedisConnectionError
    from redis.exceptions import TimeoutError as RedisTimeoutError
    from rq import Queue, Retry

    queue = Queue(QUEUE_NAME, connection=connection)
    retries = settings.job_retries
    try:
        for call in work:
            retry = None
            if retries:
                intervals = list(call.retry_intervals_s or [0])[: max(1, retries)]
                retry = Retry(max=retries, interval=intervals)
            queue.enqueue(
                call.function_path,
                *call.args,
                api_key=api_key,
                job_id=call.queue_id,
                retry=retry,
                job_timeout=settings.job_timeout_s,
                result_ttl=RESULT_TTL_S,
                failure_ttl=FAILURE_TTL_S,
            )
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise Unavailable(
            f"the rollout queue (Redis, COBALT_REDIS_URL) is unreachable: {exc}; nothing "
            "was lost, retry shortly"
        ) from exc
