"""A run started (or resumed) by a command and carried out in the foreground: its jobs
queued or run in this process as the carrier decides, waited for with live progress
unless detached, and marked `interrupted` when Ctrl-C stops them.

`cobalt run sample|refine|resume` each call one function here and print what it returns;
the API carries runs out in the background instead (`carry_out.carry_out_new_run`). The
carrier is chosen once, by `carrier.queue_carrier`, at the start of each function.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cobalt.orchestrator.console import StoreContext, executor_settings_or_exit, open_executor
from cobalt.orchestrator.worker.carrier import QueueCarrier, ThreadCarrier, queue_carrier
from cobalt.shared.errors import InvalidInput

if TYPE_CHECKING:
    from cobalt.shared.contracts.runs import RefineRunRequest, RunPublic, SampleRunRequest

__all__ = ["RunInterrupted", "resume_run", "start_refine_run", "start_sample_run"]


class RunInterrupted(Exception):
    """Ctrl-C (or SIGTERM) stopped the run's jobs in this process; the run is marked
    `interrupted`, and resuming it continues from the stored turns."""

    def __init__(self, run_id: int) -> None:
        super().__init__(f"run {run_id} interrupted")
        self.run_id = run_id


def start_sample_run(
    store: StoreContext,
    request: SampleRunRequest,
    *,
    api_key: str | None,
    detach: bool,
    quiet: bool,
) -> RunPublic:
    """Create a sample run and carry it out (`carry_out`).

    Carried out here, the dataset and the model endpoint are checked first: an unknown
    dataset is bad input whatever the endpoint, and an endpoint that does not answer (or
    does not serve the model) fails before the run exists.
    """
    from cobalt.orchestrator.datasets.catalog import dataset_summary
    from cobalt.orchestrator.runs import service

    queue = _queue(store, detach=detach)
    if queue is None:  # the jobs run here: this process must reach the model
        dataset_summary(store.sessions(), name=request.dataset, first=0)
        _require_endpoint(request.base_url, request.model, api_key)
    run_id = service.create_sample_run(
        store.sessions(), request, executor=executor_settings_or_exit()
    )
    return carry_out(store, queue, run_id, api_key=api_key, detach=detach, quiet=quiet)


def start_refine_run(
    store: StoreContext,
    request: RefineRunRequest,
    *,
    api_key: str | None,
    detach: bool,
    quiet: bool,
) -> RunPublic:
    """Create a refine run on a sample run's turn 0 and carry it out (`carry_out`);
    carried out here, the model it asks (its own or its sample run's) is checked first."""
    from cobalt.orchestrator.runs import service

    queue = _queue(store, detach=detach)
    if queue is None:  # the jobs run here: check the model they ask
        parent = service.run_public(store.sessions(), request.from_run)
        _require_endpoint(
            request.base_url or parent.base_url, request.model or parent.model, api_key
        )
    run_id = service.create_refine_run(
        store.sessions(), request, executor=executor_settings_or_exit()
    )
    return carry_out(store, queue, run_id, api_key=api_key, detach=detach, quiet=quiet)


def resume_run(
    store: StoreContext, run_id: int, *, api_key: str | None, detach: bool, quiet: bool
) -> RunPublic:
    """Reopen a stopped or failed run's failed trajectories and carry it out again; carried
    out here with work left, its model endpoint is checked first."""
    from cobalt.orchestrator.runs import service

    queue = _queue(store, detach=detach)
    sessions = store.sessions()
    service.reopen_failed(sessions, run_id)
    if queue is None:
        run = service.run_public(sessions, run_id)
        if service.open_problem_ids(sessions, run_id):  # nothing left to do needs no endpoint
            _require_endpoint(run.base_url, run.model, api_key)
    return carry_out(store, queue, run_id, api_key=api_key, detach=detach, quiet=quiet)


def carry_out(
    store: StoreContext,
    queue: QueueCarrier | None,
    run_id: int,
    *,
    api_key: str | None,
    detach: bool,
    quiet: bool,
) -> RunPublic:
    """Queue the run's open jobs (`queue`) or run them here, then wait for the run unless
    `detach`; returns the run as it then is.

    Here, Ctrl-C (or SIGTERM) stops the jobs at once; queued, the jobs stop before their
    next turn. Either way the run is marked `interrupted` and `RunInterrupted` raised.

    Raises:
        RunInterrupted: the command was interrupted.
    """
    from cobalt.orchestrator.runs import service
    from cobalt.orchestrator.runs.progress import RunProgress, wait_for_run
    from cobalt.orchestrator.worker.carry_out import carry_out_run
    from cobalt.orchestrator.worker.runtime import runtime
    from cobalt.shared.cli import stopping_on_signals

    sessions = store.sessions()
    try:
        if queue is not None:
            carry_out_run(queue, sessions, run_id, api_key=api_key)
            if detach:
                return service.run_public(sessions, run_id)
            # Its jobs are on workers: marked interrupted, they stop before their next turn.
            with stopping_on_signals(lambda: None):
                return wait_for_run(sessions, run_id, quiet=quiet)
        with open_executor() as executor, RunProgress(sessions, run_id, quiet=quiet) as tick:
            with stopping_on_signals(runtime().interrupt):
                carry_out_run(
                    ThreadCarrier(store.settings, executor.address()),
                    sessions,
                    run_id,
                    api_key=api_key,
                    on_job_done=lambda _problem, _error: tick.refresh(),
                )
            tick()
    except KeyboardInterrupt:
        service.interrupt_run(sessions, run_id)
        raise RunInterrupted(run_id) from None
    return service.run_public(sessions, run_id)


def _queue(store: StoreContext, *, detach: bool) -> QueueCarrier | None:
    """The queue carrier, or None for jobs run here; a detached run needs the queue."""
    queue = queue_carrier(store.settings)
    if detach and queue is None:
        raise InvalidInput("--detach needs COBALT_REDIS_URL (a queue that outlives us)")
    return queue


def _require_endpoint(base_url: str, model: str, api_key: str | None) -> None:
    """Raise at once when nothing answers at `base_url` (unreachable), or when it is no
    OpenAI API or does not serve `model` (bad input), rather than fail a trajectory per
    problem."""
    from cobalt.shared.clients.inference import require_served_model

    require_served_model(base_url, model, api_key)
