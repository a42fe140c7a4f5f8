"""A `cobalt worker` process: an RQ worker taking rollout jobs (runs' problems, training
rounds' groups) off the queue carrier's Redis, with the recovery sweep beside it.

Ctrl-C (or SIGTERM) stops the worker at once rather than after its current job (RQ's warm
shutdown would wait for every turn of it): the job's model and executor calls are
cancelled, its trajectories go back to pending with every stored turn kept, and the job
fails with `JobInterrupted`, so RQ puts it back on the queue for another worker (without
spending one of its COBALT_JOB_RETRIES).
"""

from __future__ import annotations

from cobalt.orchestrator.console import open_executor
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.queue import QUEUE_NAME, QueueCarrier
from cobalt.orchestrator.worker.recovery import Recovery
from cobalt.orchestrator.worker.runtime import (
    JobContext,
    close_runtime,
    install_job_context,
    runtime,
    sessions_for,
)

__all__ = ["work_on_the_queue"]


def work_on_the_queue(
    carrier: QueueCarrier,
    settings: OrchestratorSettings,
    *,
    burst: bool,
    name: str | None,
    fork: bool,
) -> str | None:
    """Take the queue's jobs until stopped (or, with `burst`, until it is empty).

    Args:
        name: The worker's name (RQ picks one when None).
        fork: Run each job in a forked child (RQ's default) rather than in this process,
            which keeps its database, model and executor connections between jobs.

    Returns:
        The worker's name when a shutdown request (Ctrl-C, SIGTERM) stopped it, else None.
    """
    from rq import SimpleWorker, Worker

    from cobalt.shared.clients import ReferenceEndpointSettings

    base = Worker if fork else SimpleWorker

    class StopsItsJob(base):  # type: ignore[valid-type,misc]
        """RQ's worker, whose warm shutdown also interrupts the job in this process."""

        stopped = False

        def handle_warm_shutdown_request(self) -> None:
            StopsItsJob.stopped = True
            runtime().interrupt()
            super().handle_warm_shutdown_request()

    worker = StopsItsJob([QUEUE_NAME], connection=carrier.connection(), name=name)
    # COBALT_EXECUTOR_URL's executor, or one this worker starts: its jobs get it (and the
    # settings) from the job context, not from the environment.
    with open_executor() as executor:
        install_job_context(
            JobContext(
                settings,
                executor=executor.address(),
                vllm_extensions=ReferenceEndpointSettings().vllm_extensions,
            )
        )
        try:
            with Recovery(carrier, sessions_for(settings.database_url)):
                worker.work(burst=burst, with_scheduler=True)
        finally:
            close_runtime()
    name_of_worker: str = worker.name
    return name_of_worker if StopsItsJob.stopped else None
