"""`cobalt worker`: an RQ worker for rollout jobs (runs and training rounds).

Exit statuses: 0 done (with --burst); 2 usage (no COBALT_REDIS_URL, bad settings);
3 the executor is not ready.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cobalt.orchestrator.console import EXIT_USAGE, fail, open_executor, settings_or_exit

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
    from redis import Redis
    from rq import SimpleWorker, Worker

    from cobalt.orchestrator.worker.queue import QUEUE_NAME
    from cobalt.orchestrator.worker.runtime import JobContext, close_runtime, install_job_context

    settings = settings_or_exit()
    if not settings.redis_url:
        raise fail(EXIT_USAGE, "COBALT_REDIS_URL is not set: a worker needs the queue's Redis")
    connection = Redis.from_url(settings.redis_url)
    worker_class = Worker if fork else SimpleWorker
    worker = worker_class([QUEUE_NAME], connection=connection, name=name)
    # COBALT_EXECUTOR_URL's executor, or one this worker starts: its jobs get it (and the
    # settings) from the job context, not from the environment.
    with open_executor() as executor:
        install_job_context(
            JobContext(settings, executor_url=executor.base_url, executor_token=executor.token)
        )
        try:
            worker.work(burst=burst, with_scheduler=True)
        finally:
            close_runtime()
