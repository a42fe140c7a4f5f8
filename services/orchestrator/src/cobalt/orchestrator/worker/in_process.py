"""Rollout jobs in this process: the embedded default for one machine (no Redis).

The same job functions the queue's workers run go to a thread pool here,
`COBALT_LOCAL_CONCURRENCY` at a time, on an executor given by the caller: the CLI's
checked one, or COBALT_EXECUTOR_URL's, or a local one started for the jobs.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TypeVar

from cobalt.orchestrator.rollouts.jobs import run_problem_job
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.runtime import JobConnections, JobInterrupted
from cobalt.shared.clients import ExecutorClientSettings
from cobalt.shared.clients.local_executor import local_executor

__all__ = ["job_executor", "run_here", "run_in_process"]

logger = logging.getLogger(__name__)

_Key = TypeVar("_Key", bound=Hashable)


@contextlib.contextmanager
def job_executor(settings: ExecutorClientSettings) -> Iterator[tuple[str, str | None]]:
    """(URL, token) of the configured executor, or of a local one started for now."""
    if settings.url:
        token = settings.auth_token
        yield settings.url, token.get_secret_value() if token else None
        return
    with local_executor() as local:
        yield local.base_url, local.token


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
    run_id: int,
    problem_ids: Sequence[int],
    *,
    api_key: str | None,
    executor: tuple[str, str | None],
    on_job_done: Callable[[int, BaseException | None], None] | None = None,
) -> list[tuple[int, BaseException]]:
    """Run a run's problem jobs here on `executor` (URL, token); returns the failures."""
    jobs = {
        problem_id: functools.partial(
            run_problem_job,
            run_id,
            problem_id,
            JobConnections(
                api_key=api_key,
                executor_url=executor[0],
                executor_token=executor[1],
                database_url=settings.database_url,
            ),
        )
        for problem_id in problem_ids
    }
    failures = run_here(settings, jobs, on_job_done)
    for problem_id, error in failures:
        if not isinstance(error, JobInterrupted):
            logger.warning("problem %d of run %d failed: %s", problem_id, run_id, error)
    return failures
