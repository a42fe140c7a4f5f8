"""`cobalt worker`: an RQ worker for rollout jobs (runs and training rounds).

Exit statuses: 0 done (with --burst); 2 usage (no COBALT_REDIS_URL, bad settings);
3 the executor is not ready; 130 interrupted.

Ctrl-C (or SIGTERM) stops the worker at once rather than after its current job (RQ's warm
shutdown would wait for every turn of it): the job's model and executor calls are
cancelled, its trajectories go back to pending with every stored turn kept, and the job
fails with `JobInterrupted`, so RQ puts it back on the queue for another worker (without
spending one of its COBALT_JOB_RETRIES). The run itself goes on. A second Ctrl-C is RQ's
cold shutdown.

Each worker also looks, every COBALT_RUN_RECOVERY_INTERVAL_S, for runs' jobs the queue
lost (their worker killed, Redis emptied) and queues them again (`worker.recovery`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from cobalt.orchestrator.console import EXIT_USAGE, fail, open_executor, settings_or_exit
from cobalt.shared.cli import interrupted

__all__ = ["worker_command"]


def worker_command(
    burst: Annotated[bool, typer.Option("--burst", help="Exit when the queue is empty.")] = False,
    name: Annotated[str | None, typer.Option(help="Worker name (default: random).")] = None,
    fork: Annotated[
        bool,
        typer.Option(
            "--fork/--no-fork",
            help="Run each job in a forked child (RQ's default: isolation, at the cost of new "
            "clients and connections per job). The default runs jobs in this process, which "
            "keeps database, model and executor connections open between jobs.",
        ),
    ] = False,
) -> None:
    """An RQ worker for rollout jobs (COBALT_REDIS_URL); run as many as you like, anywhere."""
    # Imported when a worker starts, not for `cobalt worker --help`.
    from rq import SimpleWorker, Worker

    from cobalt.orchestrator.worker.carrier import queue_carrier
    from cobalt.orchestrator.worker.queue import QUEUE_NAME
    from cobalt.orchestrator.worker.recovery import Recovery
    from cobalt.orchestrator.worker.runtime import (
        JobContext,
        close_runtime,
        install_job_context,
        runtime,
        sessions_for,
    )
    from cobalt.shared.clients import ReferenceEndpointSettings

    settings = settings_or_exit()
    carrier = queue_carrier(settings)
    if carrier is None:
        raise fail(EXIT_USAGE, "COBALT_REDIS_URL is not set: a worker needs the queue's Redis")
    connection = carrier.connection()
    base = Worker if fork else SimpleWorker

    class StopsItsJob(base):  # type: ignore[valid-type,misc]
        """RQ's worker, whose warm shutdown also interrupts the job in this process."""

        stopped = False

        def handle_warm_shutdown_request(self) -> None:
            StopsItsJob.stopped = True
            runtime().interrupt()
            super().handle_warm_shutdown_request()

    worker = StopsItsJob([QUEUE_NAME], connection=connection, name=name)
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
    if StopsItsJob.stopped:
        raise interrupted(f"worker {worker.name} stopped; a job it held went back on the queue")
