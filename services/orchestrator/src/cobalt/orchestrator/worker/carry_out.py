"""Carrying out a run (or a training round) with the carrier its entry point chose: the one
path the CLI and the API share.

On the queue carrier, a run's open problems go on the queue and `cobalt worker` processes
take them. On the thread carrier they run in this process: the CLI waits for them (with
live progress), the API cannot, so it hands them to a background thread (on
COBALT_EXECUTOR_URL's executor, or a local one started for the run). Several API
processes should use Redis.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.lifecycle import JobEvent
from cobalt.orchestrator.runs import service
from cobalt.orchestrator.runs.jobs import finish_run_if_done
from cobalt.orchestrator.store.repo_training import apply_job_event, get_job
from cobalt.orchestrator.training.service import begin_round, context_ids_for_round
from cobalt.orchestrator.worker.carrier_base import Carrier
from cobalt.orchestrator.worker.work import work_for_round, work_for_run
from cobalt.shared.contracts.training import RoundStarted

__all__ = [
    "CarriedOut",
    "carry_out_new_run",
    "carry_out_run",
    "schedule_round",
    "start_round",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CarriedOut:
    """Where a run's jobs went."""

    queued: bool
    """On the Redis queue (the run is not done yet)."""
    thread: threading.Thread | None = None
    """The background thread running them (in the background, without Redis)."""


def carry_out_run(
    carrier: Carrier,
    sessions: sessionmaker[Session],
    run_id: int,
    *,
    api_key: str | None,
    in_background: bool = False,
    on_job_done: Callable[[int, BaseException | None], None] | None = None,
) -> CarriedOut:
    """Carry out the run's open jobs; carried out here, the run is finished (or failed)
    once they are done.

    Args:
        in_background: Carried out here, do it in a thread and return at once (the API).
        on_job_done: Called after each job carried out here (progress displays).
    """
    work = work_for_run(run_id, service.open_problem_ids(sessions, run_id))
    if carrier.queued:
        carrier.carry(work, api_key=api_key)
        return CarriedOut(queued=True)

    def run_here() -> None:
        try:
            carrier.carry(work, api_key=api_key, on_job_done=on_job_done)
        finally:
            finish_run_if_done(sessions, run_id)

    if not in_background:
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
    carrier: Carrier, sessions: sessionmaker[Session], run_id: int, *, api_key: str | None
) -> threading.Thread:
    """Write a new run's trajectories, then carry it out (`carry_out_run` in the
    background): all in a thread, so the request that created the run answers at once.

    If writing them fails, the run is marked failed with the reason; if the process dies
    first, `cobalt run resume` (or POST /v1/runs/ID/resume) writes them.
    """

    def create_then_carry_out() -> None:
        try:
            service.add_missing_trajectories(sessions, run_id)
            carry_out_run(carrier, sessions, run_id, api_key=api_key, in_background=True)
        except Exception as exc:
            logger.exception("run %d: its trajectories could not be written", run_id)
            service.fail_run(sessions, run_id, f"creating its trajectories: {exc}")

    thread = threading.Thread(target=create_then_carry_out, name=f"new-run-{run_id}", daemon=True)
    thread.start()
    return thread


def schedule_round(
    carrier: Carrier,
    sessions: sessionmaker[Session],
    job_id: int,
    round: int,
    *,
    api_key: str | None = None,
) -> list[int]:
    """Carry out the round's groups: queued, or rolled out here and waited for.

    Returns the round's context ids (carried out here: the refill batches' too, which the
    groups that made them due carried, `worker.jobs.run_group`). Failures here are
    re-raised after every group has had its try, so a round is never left half done
    silently.
    """
    with sessions() as session:
        context_ids = context_ids_for_round(session, job_id=job_id, round=round)
    if not context_ids:
        return []
    rolled: dict[int, None] = dict.fromkeys(context_ids)

    def done(context_id: int, _error: BaseException | None) -> None:
        rolled.setdefault(context_id)

    failures = carrier.carry(
        work_for_round(job_id, round, context_ids), api_key=api_key, on_job_done=done
    )
    if failures:
        raise failures[0][1]
    return list(rolled)


def start_round(
    carrier: Carrier, sessions: sessionmaker[Session], job_id: int, round: int
) -> RoundStarted:
    """Carry out a training round's groups: queued, or rolled out in a thread here.

    A round that fails in the thread marks the job failed with the reason, so the trainer
    waiting for its step stops instead of waiting for ever.
    """
    contexts = begin_round(sessions, job_id, round)
    if carrier.queued:
        schedule_round(carrier, sessions, job_id, round)
        return RoundStarted(round=round, contexts=contexts, queued=True)

    def run_here() -> None:
        try:
            schedule_round(carrier, sessions, job_id, round)
        except Exception as exc:
            logger.exception("training job %d round %d failed", job_id, round)
            with sessions.begin() as session:
                job = get_job(session, job_id=job_id)
                apply_job_event(job, JobEvent.FAIL)
                job.error = f"round {round}: {type(exc).__name__}: {exc}"

    threading.Thread(target=run_here, name=f"training-{job_id}-{round}", daemon=True).start()
    return RoundStarted(round=round, contexts=contexts, queued=False)
