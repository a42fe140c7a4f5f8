"""Recovering lost work (runs' problems, training rounds' groups) from the database: the
database says what work is left, a carrier only holds it on the way to being done.
Written once; each carrier answers where its work is (`QueueWhereabouts`,
`ThreadWhereabouts`).

Work can be lost without anyone noticing: on the queue, its worker killed mid-job
(`kill -9`, an OOM kill, an evicted pod: RQ would only see the job abandoned once its
timeout, hours, has passed) or Redis restarted empty (the queue and every job record
gone); in this process, the threads that carried it gone with the process before it.
Then a run's trajectories stay pending or running, or a round's groups never come, and
nothing takes them.

A sweep (`sweep`) looks at the open work: each problem of a pending or running run with
an open trajectory, and each context of a round a running training job's trainer has
started (`training.staleness.open_rounds`) with no group recorded yet. Work is in hand
when its carrier has it: on the queue, its job waits (queued, scheduled for a retry,
deferred) or a live worker holds its lease (`worker.lease`: a Redis key the job's worker
refreshes every interval and that lapses three intervals after it died); in this
process, a thread carries it. Otherwise it is lost (a retry scheduled for a time more
than two intervals past is lost too: RQ's scheduler runs in one worker, and after that
worker is killed RQ hands it to another only minutes later; so is a job still marked
queued that is no longer on the queue: a worker took it into RQ's intermediate list and
was killed before starting it, and RQ's maintenance fails it only ten minutes later), and
once it has been seen
lost for two intervals (longer than a live worker takes to write its lease again) it is
carried again under the same id, with the API key the lost job carried if its record is
left. Work resumes from what is already stored (turns and groups are written once each).
A run's job RQ gave up on (failed with no retry left) is not queued again: the run is
marked failed with its error, and `cobalt run resume` re-queues it once the cause is
fixed. A group job RQ gave up on (sampled stale on arrival: the inference service was
restarted on its base weights) is queued again: its group is sampled anew once the
trainer has caught the service up.

Every `cobalt worker` runs a `Recovery` thread, one of them at a time sweeping (a Redis
lock per `COBALT_RUN_RECOVERY_INTERVAL_S`); the API without Redis runs one over the
training rounds its threads carry (runs rolled out in this process are resumed with
`cobalt run resume`: other processes, the CLI's, may be carrying them).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.runs import service
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store import repo_trajectories
from cobalt.orchestrator.training import service as training_service
from cobalt.orchestrator.worker.carrier_base import Carrier
from cobalt.orchestrator.worker.in_process import ThreadCarrier, in_flight
from cobalt.orchestrator.worker.lease import lease_key
from cobalt.orchestrator.worker.queue import QUEUE_NAME, QueueCarrier, enqueue
from cobalt.orchestrator.worker.work import Work, work_for_round, work_for_run

if TYPE_CHECKING:
    from redis import Redis

__all__ = [
    "QueueWhereabouts",
    "Recovery",
    "ThreadWhereabouts",
    "Whereabouts",
    "open_work",
    "recover_lost_jobs",
    "sweep",
]

logger = logging.getLogger(__name__)

LOCK_KEY = "cobalt:run-recovery:lock"
SUSPECTS_KEY = "cobalt:run-recovery:suspects"
"""Hash: queue id -> when (Redis server time) its work was first seen lost."""
GRACE_INTERVALS = 2
"""Work is seen lost this many intervals before it is carried again."""


@dataclass(frozen=True, slots=True)
class OpenWork:
    """A piece of work the database says is left, and the run it is of (None: a round's)."""

    work: Work
    run_id: int | None


def open_work(session: Session, *, runs: bool = True) -> dict[str, OpenWork]:
    """The work left (module docstring) by queue id: the runs' (unless `runs` is False)
    and the training rounds'."""
    found: dict[str, OpenWork] = {}
    if runs:
        for run_id, problem_id in repo_trajectories.open_problems_of_active_runs(session):
            for call in work_for_run(run_id, [problem_id]).values():
                found[call.queue_id] = OpenWork(call, run_id)
    for job_id, round, context_ids in training_service.open_round_contexts(session):
        for call in work_for_round(job_id, round, context_ids).values():
            found[call.queue_id] = OpenWork(call, None)
    return found


@dataclass(slots=True)
class Sighting:
    """What a carrier knows of the open work, at one time."""

    now: float
    """Its clock's time (seconds)."""
    in_hand: set[str] = field(default_factory=set)
    gave_up: dict[str, str] = field(default_factory=dict)
    """Queue id -> the error of a job its carrier gave up on."""
    api_keys: dict[str, str | None] = field(default_factory=dict)
    """Queue id -> the API key its lost job carried (when its record is left)."""
    first_seen_lost: dict[str, float] = field(default_factory=dict)


class Whereabouts(Protocol):
    """A carrier's side of the sweep: where its work is, and what it saw lost before."""

    def sight(self, work: Mapping[str, Work], grace_s: float) -> Sighting:
        """Where each piece of `work` is now."""
        ...

    def remember(self, sighting: Sighting, *, lost: Collection[str], due: Collection[str]) -> None:
        """Keep when each lost id was first seen lost; forget the ones found or `due`."""
        ...

    def carry_again(self, work: Mapping[str, Work], *, api_key: str | None) -> None:
        """Hand `work` to the carrier again, without waiting for it."""
        ...


def sweep(
    whereabouts: Whereabouts,
    sessions: sessionmaker[Session],
    *,
    grace_s: float,
    runs: bool = True,
) -> list[str]:
    """One sweep (module docstring): carry again the work lost for `grace_s`, fail the runs
    whose job RQ gave up on; returns the queue ids carried again."""
    with sessions() as session:
        left = open_work(session, runs=runs)
    sighting = whereabouts.sight({q: w.work for q, w in left.items()}, grace_s)
    gave_up: dict[int, str] = {}
    lost: list[str] = []
    for queue_id, open_ in left.items():
        if queue_id in sighting.in_hand:
            continue
        error = sighting.gave_up.get(queue_id)
        if error is not None and open_.run_id is not None:
            gave_up.setdefault(open_.run_id, f"job {queue_id} failed: {error.strip()[-1000:]}")
        else:
            lost.append(queue_id)
    for run_id, error in gave_up.items():
        logger.warning("run %d: %s", run_id, error)
        service.fail_run(sessions, run_id, f"{error}; `cobalt run resume {run_id}` queues it again")
    seen = sighting.first_seen_lost
    due = [q for q in lost if sighting.now - seen.get(q, sighting.now) >= grace_s]
    whereabouts.remember(sighting, lost=lost, due=due)
    by_key: dict[str | None, dict[str, Work]] = {}
    for queue_id in due:
        by_key.setdefault(sighting.api_keys.get(queue_id), {})[queue_id] = left[queue_id].work
    for api_key, work in by_key.items():
        whereabouts.carry_again(work, api_key=api_key)
    if due:
        logger.warning(
            "carried again %d jobs that were lost (nothing held them): %s",
            len(due),
            ", ".join(sorted(due)),
        )
    return sorted(due)


class QueueWhereabouts:
    """The queue's answers: RQ's job records, the leases and the scheduled registry; what
    was seen lost is kept in Redis (`SUSPECTS_KEY`), shared by every worker's sweep."""

    def __init__(self, settings: OrchestratorSettings, redis: Redis) -> None:
        self.settings = settings
        self.redis = redis

    def sight(self, work: Mapping[str, Work], grace_s: float) -> Sighting:
        from rq import Queue
        from rq.job import Job, JobStatus

        redis = self.redis
        ids = list(work)
        jobs = Job.fetch_many(ids, connection=redis) if ids else []
        queue = Queue(QUEUE_NAME, connection=redis)
        with redis.pipeline(transaction=False) as pipe:
            for queue_id in ids:
                pipe.exists(lease_key(queue_id))
                pipe.zscore(queue.scheduled_job_registry.key, queue_id)
                pipe.lpos(queue.key, queue_id)
            answers = pipe.execute()
        now_s, micros = redis.time()
        sighting = Sighting(now=now_s + micros / 1e6)
        found = zip(ids, jobs, answers[::3], answers[1::3], answers[2::3], strict=True)
        for queue_id, job, held, due_at, place in found:
            status = job.get_status(refresh=False) if job is not None else None
            # A retry is due at its scheduled time; the scheduler (a process of one worker)
            # moves it to the queue. Its worker killed, RQ only hands the scheduler to
            # another worker minutes later: a retry overdue by the grace is as good as lost.
            overdue = due_at is None or sighting.now - float(due_at) > grace_s
            # Queued and not on the queue: taken by a worker that has not started it, for
            # a moment, or for good if that worker was killed (the grace tells them apart).
            waiting = status == JobStatus.DEFERRED or (
                status == JobStatus.QUEUED and place is not None
            )
            if held or waiting or (status == JobStatus.SCHEDULED and not overdue):
                sighting.in_hand.add(queue_id)
                continue
            if job is not None and status == JobStatus.FAILED:
                result = job.latest_result()
                sighting.gave_up[queue_id] = (result.exc_string or "") if result else ""
            sighting.api_keys[queue_id] = job.kwargs.get("api_key") if job is not None else None
        sighting.first_seen_lost = {
            _text(k): float(v) for k, v in redis.hgetall(SUSPECTS_KEY).items()
        }
        return sighting

    def remember(self, sighting: Sighting, *, lost: Collection[str], due: Collection[str]) -> None:
        seen = sighting.first_seen_lost
        with self.redis.pipeline(transaction=False) as pipe:
            gone = [queue_id for queue_id in seen if queue_id not in lost or queue_id in due]
            if gone:
                pipe.hdel(SUSPECTS_KEY, *gone)
            for queue_id in set(lost) - seen.keys():
                pipe.hset(SUSPECTS_KEY, queue_id, sighting.now)
            if due:  # queued now: a scheduler coming back must not queue them a second time,
                # nor RQ's maintenance fail the copy a killed worker left in its intermediate list
                from rq import Queue

                queue = Queue(QUEUE_NAME, connection=self.redis)
                pipe.zrem(queue.scheduled_job_registry.key, *due)
                for queue_id in due:
                    pipe.lrem(queue.intermediate_queue_key, 0, queue_id)
            pipe.execute()

    def carry_again(self, work: Mapping[str, Work], *, api_key: str | None) -> None:
        enqueue(self.settings, self.redis, work.values(), api_key)


class ThreadWhereabouts:
    """This process's answers: the work its thread carriers have in flight; what was seen
    lost is kept here."""

    def __init__(self, carrier: ThreadCarrier) -> None:
        self.carrier = carrier
        self._first_seen_lost: dict[str, float] = {}

    def sight(self, work: Mapping[str, Work], grace_s: float) -> Sighting:
        flying = in_flight()
        return Sighting(
            now=time.monotonic(),
            in_hand={queue_id for queue_id in work if queue_id in flying},
            first_seen_lost=dict(self._first_seen_lost),
        )

    def remember(self, sighting: Sighting, *, lost: Collection[str], due: Collection[str]) -> None:
        kept = {q: self._first_seen_lost.get(q, sighting.now) for q in lost if q not in due}
        self._first_seen_lost = kept

    def carry_again(self, work: Mapping[str, Work], *, api_key: str | None) -> None:
        """In a thread: the sweep goes on meanwhile (the work is in flight from now)."""

        def carry() -> None:
            self.carrier.carry(work, api_key=api_key)

        threading.Thread(target=carry, name="recovered", daemon=True).start()


def recover_lost_jobs(
    settings: OrchestratorSettings, sessions: sessionmaker[Session], redis: Redis
) -> list[str]:
    """One sweep of the queue on `redis` (the `settings`' queue)."""
    grace_s = settings.run_recovery_interval_s * GRACE_INTERVALS
    return sweep(QueueWhereabouts(settings, redis), sessions, grace_s=grace_s)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Recovery:
    """A sweep every `COBALT_RUN_RECOVERY_INTERVAL_S` in a thread of this process: on the
    queue, when this process takes the sweep's lock (one sweep per interval among all
    workers); in this process, over the training rounds (module docstring). A sweep that
    meets Redis or the database down is tried at the next."""

    def __init__(self, carrier: Carrier, sessions: sessionmaker[Session]) -> None:
        self.carrier = carrier
        self.sessions = sessions
        self.interval_s = carrier.settings.run_recovery_interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sweep_every_interval, name="recovery")

    def __enter__(self) -> Recovery:
        if self.interval_s > 0:
            self._thread.daemon = True
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _sweep_every_interval(self) -> None:
        with self._sweeps() as sweep_once:
            while not self._stop.wait(self.interval_s):
                try:
                    sweep_once()
                except Exception as exc:  # noqa: BLE001  Redis or the database down: next time
                    logger.warning("looking for lost jobs failed (tried again): %s", exc)

    @contextlib.contextmanager
    def _sweeps(self) -> Iterator[Callable[[], object]]:
        carrier = self.carrier
        if isinstance(carrier, QueueCarrier):
            lock_ms = max(1, math.ceil(self.interval_s * 1000))
            with carrier.connection(socket_timeout=max(5.0, self.interval_s)) as redis:

                def on_the_queue() -> object:
                    if redis.set(LOCK_KEY, "held", nx=True, px=lock_ms):
                        return recover_lost_jobs(carrier.settings, self.sessions, redis)
                    return None

                yield on_the_queue
            return
        assert isinstance(carrier, ThreadCarrier)
        here = ThreadWhereabouts(carrier)
        grace_s = self.interval_s * GRACE_INTERVALS
        yield lambda: sweep(here, self.sessions, grace_s=grace_s, runs=False)
