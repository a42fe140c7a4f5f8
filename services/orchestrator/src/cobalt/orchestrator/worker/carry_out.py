"""Carrying out a run (or a training round): the one path the CLI and the API share.

With Redis, a run's open problems go on the queue and `cobalt worker` processes take
them. Without it they run in this process: the CLI waits for them (with live progress),
the API cannot, so it hands them to a background thread (on COBALT_EXECUTOR_URL's
executor, or a local one started for the run). Several API processes should use Redis.
"Queue or run here" is decided in one place, `carry_out`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.lifecycle import JobEvent
from cobalt.orchestrator.runs import service
from cobalt.orchestrator.runs.jobs import finish_run_if_done
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.repo_training import apply_job_event, get_job
from cobalt.orchestrator.training.service import begin_round, context_ids_for_round
from cobalt.orchestrator.worker import queue
from cobalt.orchestrator.worker.in_process import job_executor, run_in_process
from cobalt.orchestrator.worker.jobs import Work, work_for_round, work_for_run
from cobalt.orchestrator.worker.runtime import sessions_for
from cobalt.shared.clients import ExecutorAddress, ExecutorClientSettings
from cobalt.shared.contracts.training import RoundStarted

__all__ = [
    "CarriedOut",
    "carry_out",
    "carry_out_new_run",
    "carry_out_run",
    "schedule_round",
    "start_round",
]

_Key = TypeVar("_Key", bound=Hashable)

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CarriedOut:
    """Where a run's jobs went."""

    queued: bool
    """On the Redis queue (the run is not done yet)."""
    thread: threading.Thread | None = None
    """The background thread running them (in the background, without Redis)."""


def carry_out(
    settings: OrchestratorSettings,
    work: Mapping[_Key, Work],
    *,
    api_key: str | None,
    executor: ExecutorAddress | None,
    on_job_done: Callable[[_Key, BaseException | None], None] | None = None,
) -> list[tuple[_Key, BaseException]] | None:
    """Queue `work` (with Redis; returns None), or run it here on `executor` and return
    the failures once every job has had its try."""
    if settings.redis_url:
        queue.enqueue(settings, work.values(), api_key)
        return None
    if executor is None:
        raise ValueError("in-process jobs need an executor")
    return run_in_process(
        settings, work, api_key=api_key, executor=executor, on_job_done=on_job_done
    )


def carry_out_run(
    settings: OrchestratorSettings,
    sessions: sessionmaker[Session],
    run_id: int,
    *,
    api_key: str | None,
    executor: ExecutorAddress | None = None,
    in_background: ExecutorClientSettings | None = None,
    on_job_done: Callable[[int, BaseException | None], None] | None = None,
) -> CarriedOut:
    """Queue the run's open jobs, or run them here; here, the run is finished (or failed)
    once they are done.

    Args:
        executor: The executor in-process jobs use, waited for here (the CLI).
        in_background: Instead, run in-process jobs in a thread and return at once (the
            API), on this executor (or a local one started for them when it has no URL).
        on_job_done: Called after each in-process job (progress displays).
    """
    work = work_for_run(run_id, service.open_problem_ids(sessions, run_id))
    if settings.redis_url:
        carry_out(settings, work, api_key=api_key, executor=None)
        return CarriedOut(queued=True)

    def run_here() -> None:
        try:
            with contextlib.ExitStack() as stack:
                used = executor
                if in_background is not None:
                    used = stack.enter_context(job_executor(in_background))
                carry_out(settings, work, api_key=api_key, executor=used, on_job_done=on_job_done)
        finally:
            finish_run_if_done(sessions, run_id)

    if in_background is None:
        run_here()
        return CarriedOut(queued=False)

    def in_thread() -> None:
        try:
            run_here()
        except Exception:
            logger.exception("run %d: in-process jobs stopped", run_id)

    thread = threading.Thread(target=in_thread, name=f"run-{run_id}", daemon=True)
    thread.start()
    return CarriedOut(queued=False, thread=thread)


def carry_out_new_run(
    settings: OrchestratorSettings,
    sessions: sessionmaker[Session],
    run_id: int,
    *,
    api_key: str | None,
    executor: ExecutorClientSettings,
) -> threading.Thread:
    """Write a new run's trajectories, then carry it out (`carry_out_run` in the
    background): all in a thread, so the request that created the run answers at once.

    If writing them fails, the run is marked failed with the reason; if the process dies
    first, `cobalt run resume` (or POST /v1/runs/ID/resume) writes them.
    """

    def create_then_carry_out() -> None:
        try:
            service.add_missing_trajectories(sessions, run_id)
            carry_out_run(settings, sessions, run_id, api_key=api_key, in_background=executor)
        except Exception as exc:
            logger.exception("run %d: its trajectories could not be written", run_id)
            service.fail_run(sessions, run_id, f"creating its trajectories: {exc}")

    thread = threading.Thread(target=create_then_carry_out, name=f"new-run-{run_id}", daemon=True)
    thread.start()
    return thread


def schedule_round(
    settings: OrchestratorSettings,
    job_id: int,
    round: int,
    *,
    api_key: str | None = None,
    executor: ExecutorAddress | None = None,
) -> list[int]:
    """Queue the round's groups (with Redis), or roll them out here and wait.

    Returns the round's context ids (here: every batch's, refills included: a job that
    filters zero-variance groups rolls out batches until its round is complete; with
    Redis the workers queue the refills). In-process failures are re-raised after every
    group has had its try, so a round is never left half done silently.
    """
    sessions = sessions_for(settings.database_url)
    rolled: list[int] = []
    while True:
        with sessions() as session:
            context_ids = context_ids_for_round(session, job_id=job_id, round=round)
        if not context_ids or context_ids == rolled[-len(context_ids) :]:
            return rolled or context_ids  # done, or nothing came of the last batch
        work = work_for_round(job_id, round, context_ids)
        failures = carry_out(settings, work, api_key=api_key, executor=executor)
        if failures:
            raise failures[0][1]
        rolled += context_ids
        if settings.redis_url:
            return rolled


def start_round(
    settings: OrchestratorSettings,
    sessions: sessionmaker[Session],
    job_id: int,
    round: int,
    executor: ExecutorClientSettings,
) -> RoundStarted:
    """Queue a training round's groups; without Redis, roll them out in a thread.

    A round that fails in the thread marks the job failed with the reason, so the trainer
    waiting for its step stops instead of waiting for ever.
    """
    contexts = begin_round(sessions, job_id, round)
    if settings.redis_url:
        schedule_round(settings, job_id, round)
        return RoundStarted(round=round, contexts=contexts, queued=True)

    def run_here() -> None:
        try:
            with job_executor(executor) as started:
                schedule_round(settings, job_id, round, executor=started)
        except Exception as exc:
            logger.exception("training job %d round %d failed", job_id, round)
            with sessions.begin() as session:
                job = get_job(session, job_id=job_id)
                apply_job_event(job, JobEvent.FAIL)
                job.error = f"round {round}: {type(exc).__name__}: {exc}"

    threading.Thread(target=run_here, name=f"training-{job_id}-{round}", daemon=True).start()
    return RoundStarted(round=round, contexts=contexts, queued=False)
