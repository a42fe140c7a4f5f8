"""Recovering runs' jobs the queue lost, from the database: the database says what work is
left, Redis only holds it on the way to a worker.

A run's job can be lost without anyone noticing: its worker killed mid-job (`kill -9`, an
OOM kill, an evicted pod: RQ would only see the job abandoned once its timeout, hours,
has passed) or Redis restarted empty (the queue and every job record gone). Then the
run's trajectories stay pending or running and nothing takes them.

So every `cobalt worker` runs a `RunRecovery` thread, and one of them at a time (a Redis
lock per `COBALT_RUN_RECOVERY_INTERVAL_S`) sweeps (`recover_lost_jobs`): for each problem
of a pending or running run with an open trajectory, the problem is in hand when its job
waits on the queue (queued, scheduled for a retry, deferred) or a live worker holds its
lease (`held_lease`: a Redis key the job's worker refreshes every interval and that
lapses three intervals after it died; it is written again after Redis comes back
empty). Otherwise it is lost (a retry scheduled for a time more than two intervals past
is lost too: RQ's scheduler runs in one worker, and after that worker is killed RQ hands
it to another only minutes later), and once it has been seen lost for two intervals (longer
than a live worker takes to write its lease again) its job is queued again under the same
id, with the API key the lost job carried if its record is left. The job resumes from the
turns already stored, which are written once each (`insert_turns`). A job RQ gave up on
(failed with no retry left) is not queued again: the run is marked failed with its
error, and `cobalt run resume` re-queues it once the cause is fixed.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.runs import service
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store import repo_runs
from cobalt.orchestrator.worker.jobs import Work, work_for_run

if TYPE_CHECKING:
    from redis import Redis

__all__ = ["RunRecovery", "held_lease", "lease_key", "recover_lost_jobs"]

logger = logging.getLogger(__name__)

LOCK_KEY = "cobalt:run-recovery:lock"
SUSPECTS_KEY = "cobalt:run-recovery:suspects"
"""Hash: queue id -> when (Redis server time) its problem was first seen lost."""
LEASE_TTL_INTERVALS = 3
"""A lease lapses this many recovery intervals after its worker last refreshed it."""
GRACE_INTERVALS = 2
"""A problem is seen lost this many intervals before its job is queued again."""


def lease_key(queue_id: str) -> str:
    return f"cobalt:run-lease:{queue_id}"


@contextlib.contextmanager
def held_lease(redis_url: str, queue_id: str, interval_s: float) -> Iterator[None]:
    """Hold `queue_id`'s lease while the block runs: a thread writes it every `interval_s`
    (with a time to live of `LEASE_TTL_INTERVALS` intervals), so it lapses soon after this
    process dies and comes back soon after Redis restarted empty. Redis being unreachable
    meanwhile is not the job's problem: the lease is written again when it is back."""
    from redis import Redis
    from redis.exceptions import RedisError

    key = lease_key(queue_id)
    ttl_ms = max(1, math.ceil(interval_s * LEASE_TTL_INTERVALS * 1000))
    stop = threading.Event()
    with Redis.from_url(redis_url, socket_timeout=interval_s + 1) as redis:

        def refresh() -> None:
            while True:
                try:
                    redis.set(key, "held", px=ttl_ms)
                except RedisError as exc:
                    logger.debug("lease %s not written: %s", key, exc)
                if stop.wait(interval_s):
                    return

        thread = threading.Thread(target=refresh, name=f"lease-{queue_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            with contextlib.suppress(RedisError):
                redis.delete(key)


def recover_lost_jobs(
    settings: OrchestratorSettings, sessions: sessionmaker[Session], redis: Redis
) -> list[str]:
    """One sweep (module docstring): queue again the jobs lost for two intervals, fail the
    runs whose job RQ gave up on; returns the queue ids queued again."""
    from rq import Queue
    from rq.job import Job, JobStatus

    from cobalt.orchestrator.worker import queue

    with sessions() as session:
        open_problems = repo_runs.open_problems_of_active_runs(session)
    work: dict[str, tuple[int, Work]] = {}
    for run_id, problem_id in open_problems:
        for call in work_for_run(run_id, [problem_id]).values():
            work[call.queue_id] = (run_id, call)
    ids = list(work)
    jobs = Job.fetch_many(ids, connection=redis) if ids else []
    scheduled = Queue(queue.QUEUE_NAME, connection=redis).scheduled_job_registry
    with redis.pipeline(transaction=False) as pipe:
        for queue_id in ids:
            pipe.exists(lease_key(queue_id))
            pipe.zscore(scheduled.key, queue_id)
        answers = pipe.execute()
    now_s, micros = redis.time()
    now = now_s + micros / 1e6
    grace_s = settings.run_recovery_interval_s * GRACE_INTERVALS
    lost: dict[str, Job | None] = {}
    gave_up: dict[int, str] = {}
    for queue_id, job, held, due_at in zip(ids, jobs, answers[::2], answers[1::2], strict=True):
        status = job.get_status(refresh=False) if job is not None else None
        # A retry is due at its scheduled time; the scheduler (a process of one worker)
        # moves it to the queue. Its worker killed, RQ only hands the scheduler to another
        # worker minutes later: a retry overdue by the grace is as good as lost.
        overdue = due_at is None or now - float(due_at) > grace_s
        if held or status in (JobStatus.QUEUED, JobStatus.DEFERRED):
            continue
        if status == JobStatus.SCHEDULED and not overdue:
            continue
        if job is not None and status == JobStatus.FAILED:
            run_id = work[queue_id][0]
            result = job.latest_result()
            error = (result.exc_string or "") if result is not None else ""
            gave_up.setdefault(run_id, f"job {queue_id} failed: {error.strip()[-1000:]}")
        else:
            lost[queue_id] = job
    for run_id, error in gave_up.items():
        logger.warning("run %d: %s", run_id, error)
        service.fail_run(sessions, run_id, f"{error}; `cobalt run resume {run_id}` queues it again")
    seen = {_text(k): float(v) for k, v in redis.hgetall(SUSPECTS_KEY).items()}
    due = {q: job for q, job in lost.items() if now - seen.get(q, now) >= grace_s}
    with redis.pipeline(transaction=False) as pipe:
        gone = [queue_id for queue_id in seen if queue_id not in lost or queue_id in due]
        if gone:
            pipe.hdel(SUSPECTS_KEY, *gone)
        for queue_id in lost.keys() - seen.keys():
            pipe.hset(SUSPECTS_KEY, queue_id, now)
        if due:  # queued now: a scheduler coming back must not queue them a second time
            pipe.zrem(scheduled.key, *due)
        pipe.execute()
    by_key: dict[str | None, list[Work]] = {}
    for queue_id, job in due.items():
        api_key = job.kwargs.get("api_key") if job is not None else None
        by_key.setdefault(api_key, []).append(work[queue_id][1])
    for api_key, calls in by_key.items():
        queue.enqueue(settings, calls, api_key)
    if due:
        logger.warning(
            "queued again %d run jobs the queue had lost (no worker holds them): %s",
            len(due),
            ", ".join(sorted(due)),
        )
    return sorted(due)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class RunRecovery:
    """`recover_lost_jobs` every `COBALT_RUN_RECOVERY_INTERVAL_S` in a thread of this
    process, when this process takes the sweep's lock (one sweep per interval among all
    workers); a sweep that meets Redis or the database down is tried at the next."""

    def __init__(self, settings: OrchestratorSettings, sessions: sessionmaker[Session]) -> None:
        if not settings.redis_url:
            raise ValueError("run recovery needs the queue's Redis (COBALT_REDIS_URL)")
        self.settings = settings
        self.sessions = sessions
        self.redis_url = settings.redis_url
        self.interval_s = settings.run_recovery_interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sweep_every_interval, name="run-recovery")

    def __enter__(self) -> RunRecovery:
        if self.interval_s > 0:
            self._thread.daemon = True
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _sweep_every_interval(self) -> None:
        from redis import Redis

        lock_ms = max(1, math.ceil(self.interval_s * 1000))
        with Redis.from_url(self.redis_url, socket_timeout=max(5.0, self.interval_s)) as redis:
            while not self._stop.wait(self.interval_s):
                try:
                    if redis.set(LOCK_KEY, "held", nx=True, px=lock_ms):
                        recover_lost_jobs(self.settings, self.sessions, redis)
                except Exception as exc:  # noqa: BLE001  Redis or the database down: next time
                    logger.warning("looking for lost run jobs failed (tried again): %s", exc)
