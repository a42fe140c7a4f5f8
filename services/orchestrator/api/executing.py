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

__all__ = ["start_run"]

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
