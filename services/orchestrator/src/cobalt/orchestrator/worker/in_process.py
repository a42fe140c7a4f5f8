"""Rollout jobs in this process: the embedded default for one machine (no Redis).

The same entry points the queue's workers run go to a thread pool here,
`COBALT_LOCAL_CONCURRENCY` at a time, on an executor given by the caller: the CLI's
checked one, or COBALT_EXECUTOR_URL's, or a local one started for the jobs.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Hashable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TypeVar

from cobalt.orchestrator.rollouts.runtime import JobInterrupted
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.jobs import JobResources, Work
from cobalt.shared.clients import ExecutorAddress, ExecutorClientSettings
from cobalt.shared.clients.local_executor import local_executor

__all__ = ["job_executor", "run_here", "run_in_process"]

logger = logging.getLogger(__name__)

_Key = TypeVar("_Key", bound=Hashable)


@contextlib.contextmanager
def job_executor(settings: ExecutorClientSettings) -> Iterator[ExecutorAddress]:
    """The configured executor, or a local one started for now."""
    configured = settings.address()
    if configured is not None:
        yield configured
        return
    with local_executor() as local:
        yield ExecutorAddress(local.base_url, local.token)


def run_here(
    settings: OrchestratorSettings,
    jobs: Mapping[_Key, Callable[[], object]],
    on_job_done: Callable[[_Key, BaseException | None], None] | None = None,
) -> list[tuple[_Key, BaseException]]:
    """Run every job, `settings.local_concurrency` at a time; returns the (key, error)
    failures after every job has had its try."""
    failures: list[tuple[_Key, BaseException]] = []
    workers = max(1, settings.local_concurrency)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rollout") as pool:
        futures = {pool.submit(job): key for key, job in jobs.items()}
        try:
            for future in as_completed(futures):
                error = future.exception()
                if error is not None:
                    failures.append((futures[future], error))
                if on_job_done is not None:
                    on_job_done(futures[future], error)
        except BaseException:
            # Ctrl-C: jobs not started never start; the running ones end at once (the
            # signal's callback interrupted the runtime) and are waited for.
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    return failures


def run_in_process(
    settings: OrchestratorSettings,
    work: Mapping[_Key, Work],
    *,
    api_key: str | None,
    executor: ExecutorAddress,
    on_job_done: Callable[[_Key, BaseException | None], None] | None = None,
) -> list[tuple[_Key, BaseException]]:
    """Run each call here on `executor`; returns the failures (logged, but for jobs
    stopped because the process is stopping)."""
    resources = JobResources.here(settings, executor, api_key)
    jobs = {
        key: functools.partial(call.function, *call.args, resources=resources)
        for key, call in work.items()
    }
    failures = run_here(settings, jobs, on_job_done)
    for key, error in failures:
        if not isinstance(error, JobInterrupted):
            logger.warning("job %s failed: %s", work[key].queue_id, error)
    return failures
