"""Carrying out a run (or a training round): the one path the CLI and the API share.

With Redis, a run's open problems go on the queue and `cobalt worker` processes take
them. Without it they run in this process: the CLI waits for them (with live progress),
the API cannot, so it hands them to a background thread (on COBALT_EXECUTOR_URL's
executor, or a local one started for the run). Several API processes should use Redis.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.lifecycle import JobEvent
from cobalt.orchestrator.rollouts.jobs import finish_run_if_done
from cobalt.orchestrator.runs import service
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.repo_training import apply_job_event, get_job
from cobalt.orchestrator.training import jobs as training_jobs
from cobalt.orchestrator.training.service import begin_round
from cobalt.orchestrator.worker import queue
from cobalt.orchestrator.worker.in_process import job_executor, run_in_process
from cobalt.shared.clients import ExecutorClientSettings
from cobalt.shared.contracts.training import RoundStarted

__all__ = ["CarriedOut", "carry_out_new_run", "carry_out_run", "start_round"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CarriedOut:
    """Where a run's jobs went."""

    queued: bool
    """On the Redis queue (the run is not done yet)."""
    thread: threading.Thread | None = None
    """The background thread running them (in the background, without Redis)."""


def carry_out_run(
    settings: OrchestratorSettings,
    sessions: sessionmaker[Session],
    run_id: int,
    *,
    api_key: str | None,
    executor: tuple[str, str | None] | None = None,
    in_background: ExecutorClientSettings | None = None,
    on_job_done: Callable[[int, BaseException | None], None] | None = None,
) -> CarriedOut:
    """Queue the run's open jobs, or run them here; here, the run is finished (or failed)
    once they are done.

    Args:
        executor: (URL, token) of the executor in-process jobs use, waited for here
            (the CLI).
        in_background: Instead, run in-process jobs in a thread and return at once (the
            API), on this executor (or a local one started for them when it has no URL).
        on_job_done: Called after each in-process job (progress displays).
    """
    problem_ids = service.open_problem_ids(sessions, run_id)
    if settings.redis_url:
        queue.enqueue_run(settings, run_id, problem_ids, api_key=api_key)
        return CarriedOut(queued=True)

    def run_here() -> None:
        try:
            if in_background is None:
                if executor is None:
                    raise ValueError("in-process jobs need an executor")
                run_in_process(settings, run_id, problem_ids, api_key=api_key,
                               executor=executor, on_job_done=on_job_done)  # fmt: skip
                return
            with job_executor(in_background) as started:
                run_in_process(settings, run_id, problem_ids, api_key=api_key,
                               executor=started, on_job_done=on_job_done)  # fmt: skip
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
        training_jobs.schedule_round(settings, job_id, round)
        return RoundStarted(round=round, contexts=contexts, queued=True)

    def run_here() -> None:
        try:
            with job_executor(executor) as started:
                training_jobs.schedule_round(settings, job_id, round, executor=started)
        except Exception as exc:
            logger.exception("training job %d round %d failed", job_id, round)
            with sessions.begin() as session:
                job = get_job(session, job_id=job_id)
                apply_job_event(job, JobEvent.FAIL)
                job.error = f"round {round}: {type(exc).__name__}: {exc}"

    threading.Thread(target=run_here, name=f"training-{job_id}-{round}", daemon=True).start()
    return RoundStarted(round=round, contexts=contexts, queued=False)
