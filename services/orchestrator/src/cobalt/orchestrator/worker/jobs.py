"""The worker's entry points, one per kind of work: `run_problem` (one problem of a run)
and `run_group` (one context's group of a training round).

Each resolves what a job uses once (`JobResources`: the database, the rollout runtime,
the executor, the model's API key, its carrier) and calls one domain function that takes
those as arguments (`runs.jobs.roll_out_run_problem`, `training.jobs.roll_out_training_group`).
A job taken off the queue gets them from the process's job context (`worker.runtime`);
the thread carrier passes them. What a job makes due (a round's refill) it hands to its
carrier, the same rule whichever carrier that is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from cobalt.orchestrator.rollouts.runtime import JobInterrupted
from cobalt.orchestrator.runs.jobs import reopen_problem, roll_out_run_problem
from cobalt.orchestrator.training.jobs import roll_out_training_group
from cobalt.orchestrator.training.service import due_refill
from cobalt.orchestrator.worker.carrier import carrier_for
from cobalt.orchestrator.worker.carrier_base import Carrier
from cobalt.orchestrator.worker.resources import JobResources
from cobalt.orchestrator.worker.runtime import job_context
from cobalt.orchestrator.worker.work import work_for_round, work_for_run
from cobalt.shared.errors import Unavailable

__all__ = ["JobResources", "run_group", "run_problem"]

logger = logging.getLogger(__name__)

_Result = TypeVar("_Result")


def run_problem(
    run_id: int,
    problem_id: int,
    api_key: str | None = None,
    *,
    resources: JobResources | None = None,
) -> dict[str, int]:
    """One problem of one run (`runs.jobs.roll_out_run_problem`), holding what its carrier
    holds meanwhile (a queued job: its lease, so run recovery knows a live worker has it).
    A job that fails while RQ will try it again leaves its trajectories pending, not
    failed: the run is not over (`runs.jobs.reopen_problem`)."""
    used = resources or _of_process(api_key)
    (work,) = work_for_run(run_id, [problem_id]).values()
    try:
        with _carrier(used).holding(work):
            return _call(roll_out_run_problem, (run_id, problem_id), used)
    except JobInterrupted:
        raise
    except Exception:
        if _retried():
            try:
                reopen_problem(used.sessions, run_id, problem_id)
            except Exception as exc:  # noqa: BLE001  the database down too: they stay open
                logger.warning("run %d problem %d not reopened: %s", run_id, problem_id, exc)
        raise


def run_group(
    job_id: int,
    context_id: int,
    round: int,
    api_key: str | None = None,
    *,
    resources: JobResources | None = None,
) -> dict[str, int | None]:
    """One context's group of a training round (`training.jobs.roll_out_training_group`),
    holding what its carrier holds meanwhile (as `run_problem`); then the carrier hears of
    the group (a waiting trainer wakes up) and carries the refill batch of the round that
    this group made due, if any (`due_refill`)."""
    used = resources or _of_process(api_key)
    carrier = _carrier(used)
    (work,) = work_for_round(job_id, round, [context_id]).values()
    with carrier.holding(work):
        result = _call(roll_out_training_group, (job_id, context_id, round), used)
    group_id = result["group_id"]
    if group_id is not None:
        carrier.group_recorded(job_id, group_id)
    refill = due_refill(used.sessions, job_id, round)
    if refill:
        carrier.carry(work_for_round(job_id, round, refill), api_key=api_key)
    return result


def _of_process(api_key: str | None) -> JobResources:
    """For a job taken off the queue: the process's job context decides."""
    context = job_context()
    if context.executor is None:
        raise Unavailable("no executor for this worker: set COBALT_EXECUTOR_URL")
    return JobResources.here(context.settings, context.executor, api_key)


def _carrier(used: JobResources) -> Carrier:
    return used.carrier or carrier_for(used.settings, used.executor)


def _call(body: Callable[..., _Result], args: tuple[int, ...], used: JobResources) -> _Result:
    """The domain function with the job's resources; a job stopped with its process goes
    back on the queue."""
    try:
        return body(
            *args,
            sessions=used.sessions,
            runtime=used.runtime,
            executor=used.executor,
            api_key=used.api_key,
        )
    except JobInterrupted:
        _keep_retry()
        raise


def _retried() -> bool:
    """Whether RQ will try the job failing now again (it has retries left)."""
    from rq import get_current_job

    job = get_current_job()
    return job is not None and (job.retries_left or 0) > 0


def _keep_retry() -> None:
    """Under RQ, the job failing now goes back on the queue without spending a retry: its
    worker was stopped (Ctrl-C, SIGTERM), the job did nothing wrong, and with no retry
    left it would otherwise be dropped while its trajectories wait as pending."""
    from rq import get_current_job

    job = get_current_job()
    if job is not None:
        job.retries_left = (job.retries_left or 0) + 1
