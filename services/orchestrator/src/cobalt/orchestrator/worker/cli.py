"""The commands that carry work out: `cobalt worker` (an RQ worker for rollout jobs: runs
and training rounds) and `cobalt run sample|refine|resume` (a run started here, carried
out by `worker.foreground`), which join `cobalt run` by their entry points.

A run started here waits for its jobs and shows live progress unless `--detach`. Where
the jobs run: on RQ workers when COBALT_REDIS_URL is set (start `cobalt worker` anywhere
that reaches Redis, the database, the model endpoint and the executor), otherwise in
this process. Ctrl-C marks such a run `interrupted` (exit 130); `cobalt run resume`
continues it.

`cobalt worker` (`worker.rq_worker`) exits 0 when done (with --burst); 2 on usage (no
COBALT_REDIS_URL, bad settings); 3 when the executor is not ready; 130 interrupted: Ctrl-C
(or SIGTERM) stops it at once, its job going back on the queue for another worker while
the run goes on; a second Ctrl-C is RQ's cold shutdown. Each worker also looks, every
COBALT_RUN_RECOVERY_INTERVAL_S, for runs' jobs the queue lost (their worker killed, Redis
emptied) and queues them again (`worker.recovery`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from cobalt.orchestrator.console import (
    EXIT_USAGE,
    JsonOption,
    SamplingSetOption,
    echo_json,
    fail,
    handled,
    sampling_settings_set,
    settings_or_exit,
    store_context,
)
from cobalt.orchestrator.options import OptionGroup, model_options
from cobalt.orchestrator.runs.cli import print_run
from cobalt.shared.cli import interrupted
from cobalt.shared.contracts.runs import INHERITED_BY_REFINE, RefineRunRequest, SampleRunRequest
from cobalt.shared.contracts.statuses import RunStatus
from cobalt.shared.errors import first_validation_error_parts

# The run service, the store and the carriers (RQ among them) are imported when a command
# runs, so that `cobalt run --help` loads none of them.
if TYPE_CHECKING:
    from collections.abc import Iterator

    from cobalt.shared.contracts.runs import RunPublic

__all__ = ["refine", "resume", "sample", "worker_command"]

EXIT_RUN_FAILED = 1

_Request = TypeVar("_Request", bound=BaseModel)
_Command = TypeVar("_Command", bound=Callable[..., Any])

DetachOption = Annotated[
    bool, typer.Option("--detach", help="Return once queued (needs COBALT_REDIS_URL).")
]
ApiKeyOption = Annotated[
    str | None,
    typer.Option(
        "--api-key",
        envvar="COBALT_MODEL_API_KEY",
        help="Key for the model endpoint (env COBALT_MODEL_API_KEY); never stored.",
    ),
]


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
    from cobalt.orchestrator.worker.carrier import queue_carrier
    from cobalt.orchestrator.worker.rq_worker import work_on_the_queue

    settings = settings_or_exit()
    carrier = queue_carrier(settings)
    if carrier is None:
        raise fail(EXIT_USAGE, "COBALT_REDIS_URL is not set: a worker needs the queue's Redis")
    stopped = work_on_the_queue(carrier, settings, burst=burst, name=name, fork=fork)
    if stopped is not None:
        raise interrupted(f"worker {stopped} stopped; a job it held went back on the queue")


def _request(
    contract: type[_Request], sampling_set: list[str] | None, **values: object
) -> _Request:
    """The request from the options, `--set` pairs winning over the settings' options."""
    values = {k: v for k, v in values.items() if v is not None}
    values.update(sampling_settings_set(sampling_set))
    try:
        return contract.model_validate(values)
    except ValidationError as exc:
        where, message = first_validation_error_parts(exc)
        raise fail(EXIT_USAGE, f"--{where.replace('_', '-')}: {message}") from exc


def _request_options(
    request: type[BaseModel],
    *,
    skip: frozenset[str] = frozenset(),
    inherited: frozenset[str] | None = None,
    **names: str,
) -> Callable[[_Command], _Command]:
    """A run request's fields as options (`settings`); the endpoint's key is `--api-key`
    (env), `--turns` the old `--feedback-turns`.

    Each option defaults to the model's value, or, with `inherited`, is sent only when
    given (those fields are then another run's unless given; the others the model's)."""
    return model_options(
        OptionGroup(
            request,
            into="settings",
            unset=inherited is not None,
            inherited=inherited or frozenset(),
            skip=skip | {"api_key"},
            names={"think_cap_chars": "think-cap", **names},
            deprecated={"turns": "feedback_turns"},
        )
    )


@contextlib.contextmanager
def _carried_out() -> Iterator[None]:
    """Errors to exit statuses; an interrupted run exits 130 saying how to continue it."""
    from cobalt.orchestrator.worker.foreground import RunInterrupted

    try:
        with handled():
            yield
    except RunInterrupted as stopped:
        raise interrupted(
            f"run {stopped.run_id} stopped; `cobalt run resume {stopped.run_id}` continues it"
        ) from None


def _finish(public: RunPublic, as_json: bool) -> None:
    """Print the run a command carried out; exit 130 if interrupted, 1 if it failed."""
    if as_json:
        echo_json({"run_id": public.id, "status": public.status})
    else:
        print_run(public)
    if public.status == RunStatus.INTERRUPTED:
        raise interrupted(f"run {public.id}; `cobalt run resume {public.id}` continues it")
    if public.status in (RunStatus.FAILED, RunStatus.CANCELLED):
        raise typer.Exit(EXIT_RUN_FAILED)


@_request_options(SampleRunRequest, skip=frozenset({"limits"}), compare="judge")
def sample(
    settings: dict[str, Any],
    api_key: ApiKeyOption = None,
    sampling_set: SamplingSetOption = None,
    as_json: JsonOption = False,
    detach: DetachOption = False,
) -> None:
    """Sample n programs per problem (turn 0), the start every refine run shares.

    With --feedback-turns T the same run goes on with T feedback turns (multi-turn from
    scratch). Every option but the last four is a field of `SampleRunRequest`.
    """
    from cobalt.orchestrator.worker.foreground import start_sample_run

    request = _request(SampleRunRequest, sampling_set, **settings)
    with _carried_out():
        run = start_sample_run(
            store_context(), request, api_key=api_key, detach=detach, quiet=as_json
        )
    _finish(run, as_json)


@_request_options(RefineRunRequest, inherited=INHERITED_BY_REFINE, from_run="from")
def refine(
    settings: dict[str, Any],
    api_key: ApiKeyOption = None,
    sampling_set: SamplingSetOption = None,
    as_json: JsonOption = False,
    detach: DetachOption = False,
) -> None:
    """Feedback turns on top of a sample run's turn 0 (the same turn 0 for every experiment).

    Options shown as inherited (and --base-url, --model) are the sample run's
    unless given, as are its limits, judge, template and n; a given option (or
    --set pair) overrides only itself. Every option but the last four is a
    field of `RefineRunRequest`."""
    from cobalt.orchestrator.worker.foreground import start_refine_run

    request = _request(RefineRunRequest, sampling_set, **settings)
    with _carried_out():
        run = start_refine_run(
            store_context(), request, api_key=api_key, detach=detach, quiet=as_json
        )
    _finish(run, as_json)


def resume(
    run_id: Annotated[int, typer.Argument(help="The run to continue.")],
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
    detach: DetachOption = False,
) -> None:
    """Continue a stopped or failed run from the turns already stored."""
    from cobalt.orchestrator.worker.foreground import resume_run

    with _carried_out():
        run = resume_run(store_context(), run_id, api_key=api_key, detach=detach, quiet=as_json)
    _finish(run, as_json)
