"""Carrying out a run's jobs for the API: on the RQ queue, or in a background thread.

The CLI waits for in-process jobs; the API cannot, so without Redis a run's jobs go to a
thread of the API process (with `COBALT_EXECUTOR_URL`'s executor, or a local one started
for the run). Several API processes should use Redis.
"""

from __future__ import annotations

import logging
import threading

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.rollouts.jobs import finish_run_if_done
from cobalt.orchestrator.runs import queueing, service
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.models import TrainingJobStatus
from cobalt.orchestrator.store.repo_training import get_job
from cobalt.orchestrator.training import jobs as training_jobs
from cobalt.orchestrator.training.service import begin_round
from cobalt.shared.contracts.training import RoundStarted

__all__ = ["start_round", "start_run"]

logger = logging.getLogger(__name__)


def start_run(
    settings: OrchestratorSettings,
    sessions: sessionmaker[Session],
    run_id: int,
    *,
    api_key: str | None,
) -> threading.Thread | None:
    """Queue the run's open jobs; without Redis, run them in a thread (returned)."""
    problem_ids = service.open_problem_ids(sessions, run_id)
    if settings.redis_url:
        queueing.enqueue_run(settings, run_id, problem_ids, api_key=api_key)
        return None

    def run_here() -> None:
        try:
            with queueing.job_executor() as executor:
                queueing.run_in_process(
                    settings, run_id, problem_ids, api_key=api_key, executor=executor
                )
        except Exception:
            logger.exception("run %d: in-process jobs stopped", run_id)
        finally:
            finish_run_if_done(sessions, run_id)

    thread = threading.Thread(target=run_here, name=f"run-{run_id}", daemon=True)
    thread.start()
    return thread


def start_round(
    settings: OrchestratorSettings, sessions: sessionmaker[Session], job_id: int, round: int
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
            with queueing.job_executor() as executor:
                training_jobs.schedule_round(settings, job_id, round, executor=executor)
        except Exception as exc:
            logger.exception("training job %d round %d failed", job_id, round)
            with sessions.begin() as session:
                job = get_job(session, job_id=job_id)
                job.status = TrainingJobStatus.FAILED.value
                job.error = f"round {round}: {type(exc).__name__}: {exc}"

    threading.Thread(target=run_here, name=f"training-{job_id}-{round}", daemon=True).start()
    return RoundStarted(round=round, contexts=contexts, queued=False)
