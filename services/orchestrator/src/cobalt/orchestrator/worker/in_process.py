"""The thread carrier: work runs in a thread pool of this process (no Redis), the embedded
default for one machine.

The same entry points the queue's workers run go to a pool here,
`COBALT_LOCAL_CONCURRENCY` at a time, on an executor chosen by the entry point: the CLI's
checked one, or COBALT_EXECUTOR_URL's, or a local one started for the work. Work a job
makes due (a training round's refill) joins the same pool, and `carry` returns once every
call, those included, has had its try.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import threading
from collections.abc import Hashable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from cobalt.orchestrator.rollouts.runtime import JobInterrupted
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.carrier_base import Calls, Carrier, Failures, OnDone
from cobalt.orchestrator.worker.resources import JobResources
from cobalt.orchestrator.worker.work import entry_point
from cobalt.shared.clients import ExecutorAddress, ExecutorClientSettings
from cobalt.shared.clients.local_executor import local_executor

__all__ = ["ThreadCarrier", "in_flight", "job_executor"]

logger = logging.getLogger(__name__)

_WAKE_S = 0.5
"""How often the waiting thread looks up from the pool (so Ctrl-C reaches it)."""


_IN_FLIGHT: dict[str, int] = {}
"""Queue id -> how many calls of it this process's thread carriers have in flight
(submitted and not done)."""
_IN_FLIGHT_LOCK = threading.Lock()


def in_flight() -> set[str]:
    """The queue ids of the work this process's thread carriers carry now (recovery)."""
    with _IN_FLIGHT_LOCK:
        return set(_IN_FLIGHT)


def _take_off(queue_id: str, count: int) -> None:
    """Count a call of `queue_id` submitted (+1) or done (-1)."""
    with _IN_FLIGHT_LOCK:
        left = _IN_FLIGHT.get(queue_id, 0) + count
        if left:
            _IN_FLIGHT[queue_id] = left
        else:
            _IN_FLIGHT.pop(queue_id, None)


@contextlib.contextmanager
def job_executor(settings: ExecutorClientSettings) -> Iterator[ExecutorAddress]:
    """The configured executor, or a local one started for now."""
    configured = settings.address()
    if configured is not None:
        yield configured
        return
    with local_executor() as local:
        yield ExecutorAddress(local.base_url, local.token)


class ThreadCarrier(Carrier):
    """Carries work in a thread pool of this process: `carry` returns the failures once
    every call has had its try.

    Args:
        executor: The executor the jobs use, or the settings of one (COBALT_EXECUTOR_URL's,
            else a local one started for each `carry`).
    """

    queued = False

    def __init__(
        self, settings: OrchestratorSettings, executor: ExecutorAddress | ExecutorClientSettings
    ) -> None:
        super().__init__(settings)
        self.executor = executor

    def _carry(self, work: Calls, api_key: str | None, on_done: OnDone) -> Failures:
        with contextlib.ExitStack() as stack:
            executor = self.executor
            if isinstance(executor, ExecutorClientSettings):
                executor = stack.enter_context(job_executor(executor))
            batch = _Batch(self.settings, executor, api_key, on_done)
            failures = batch.run(work)
        for key, error in failures:
            if not isinstance(error, JobInterrupted):
                logger.warning("job %s failed: %s", batch.queue_ids[key], error)
        return failures


class _Batch(ThreadCarrier):
    """One `carry` in flight: its pool, and the carrier its jobs carry what they make due
    with (into the same pool, once per queue id, as the queue replaces a job of one id)."""

    def __init__(
        self,
        settings: OrchestratorSettings,
        executor: ExecutorAddress,
        api_key: str | None,
        on_done: OnDone,
    ) -> None:
        super().__init__(settings, executor)
        self.resources = JobResources.here(settings, executor, api_key, carrier=self)
        self.on_done = on_done
        self.queue_ids: dict[Hashable, str] = {}
        self._submitted: set[str] = set()
        self._lock = threading.Lock()
        self._done: queue.SimpleQueue[tuple[Hashable, Future[object]]] = queue.SimpleQueue()
        self._outstanding = 0
        self._pool: ThreadPoolExecutor | None = None

    def run(self, work: Calls) -> Failures:
        """Every call of `work`, and what they make due, `local_concurrency` at a time."""
        failures: Failures = []
        workers = max(1, self.settings.local_concurrency)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout") as pool:
            self._pool = pool
            try:
                self._submit(work)
                while self._outstanding:
                    try:
                        key, future = self._done.get(timeout=_WAKE_S)
                    except queue.Empty:
                        continue
                    with self._lock:
                        self._outstanding -= 1
                    error = future.exception()
                    if error is not None:
                        failures.append((key, error))
                    if self.on_done is not None:
                        self.on_done(key, error)
            except BaseException:
                # Ctrl-C: jobs not started never start; the running ones end at once (the
                # signal's callback interrupted the runtime) and are waited for.
                pool.shutdown(wait=True, cancel_futures=True)
                raise
        return failures

    def _carry(self, work: Calls, api_key: str | None, on_done: OnDone) -> Failures:
        """From a job of this batch: into the batch's pool (its failures are the batch's)."""
        self._submit(work)
        return []

    def _submit(self, work: Calls) -> None:
        assert self._pool is not None
        with self._lock:
            for key, call in work.items():
                if call.queue_id in self._submitted:
                    continue
                self._submitted.add(call.queue_id)
                self.queue_ids[key] = call.queue_id
                self._outstanding += 1
                _take_off(call.queue_id, +1)
                future = self._pool.submit(entry_point(call), *call.args, resources=self.resources)
                future.add_done_callback(functools.partial(self._finished, key, call.queue_id))

    def _finished(self, key: Hashable, queue_id: str, future: Future[object]) -> None:
        try:
            _take_off(queue_id, -1)
        finally:  # the waiting thread counts on this, whatever happens
            self._done.put((key, future))
