"""`cobalt run ...`: sample, refine, evaluate, compare, list, show, cancel, resume.

A run started here waits for its jobs and shows live progress unless `--detach`. Where
the jobs run: on RQ workers when COBALT_REDIS_URL is set (start `cobalt worker` anywhere
that reaches Redis, the database, the model endpoint and the executor), otherwise in
this process. With `--json`, each command prints one JSON object on stdout (the contract
scripts use); tables and bars go to the terminal.

Exit statuses (docs/cli.md): 0 done; 1 the run ended with failed trajectories (or was
cancelled); 2 usage; 3 a service (the model endpoint among them) cannot be reached;
130 interrupted: Ctrl-C marks the run `interrupted` and `cobalt run resume` continues it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError
from rich.console import Console
from rich.table import Table

from cobalt.orchestrator.console import (
    EXIT_USAGE,
    JsonOption,
    SamplingSetOption,
    StoreContext,
    echo_json,
    executor_settings_or_exit,
    fail,
    handled,
    open_executor,
    progress_bar,
    report_to_option,
    reward_tokenizer,
    sampling_settings_set,
    settings_or_exit,
    store_context,
)
from cobalt.orchestrator.options import OptionGroup, model_options
from cobalt.orchestrator.runs.progress import RunProgress, wait_for_run
from cobalt.shared.cli import interrupted, stopping_on_signals
from cobalt.shared.contracts.runs import INHERITED_BY_REFINE, RefineRunRequest, SampleRunRequest
from cobalt.shared.contracts.statuses import RunStatus
from cobalt.shared.errors import InvalidInput, first_validation_error_parts
from cobalt.shared.reward_format import RewardFormat
from cobalt.shared.tables import print_table
from cobalt.shared.weight_identity import policy_line

# The commands import the store, the run service and the contracts when they run, so that
# `cobalt run --help` loads none of SQLAlchemy, the OpenAI client, RQ or matplotlib.
if TYPE_CHECKING:
    from cobalt.shared.contracts.runs import EvaluationReport, RunPublic

__all__ = ["run_app"]

EXIT_RUN_FAILED = 1

_Request = TypeVar("_Request", bound=BaseModel)
_Command = TypeVar("_Command", bound=Callable[..., Any])

run_app = typer.Typer(
    help="Rollout runs: sample, refine, evaluate, compare; list, show, cancel, resume.",
    no_args_is_help=True,
)

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


def _store(*, detach: bool = False) -> StoreContext:
    settings = settings_or_exit()
    if detach:  # the worker package (RQ, the clients) only where a command may queue
        from cobalt.orchestrator.worker.carrier import queue_carrier

        if queue_carrier(settings) is None:
            raise fail(EXIT_USAGE, "--detach needs COBALT_REDIS_URL (a queue that outlives us)")
    return store_context(settings)


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


def _require_endpoint(base_url: str, model: str, api_key: str | None) -> None:
    """Exit 3 at once when nothing answers at `base_url`, 2 when it is no OpenAI API or
    does not serve `model`, rather than a failed trajectory per problem (the run then
    never starts)."""
    from cobalt.shared.clients.inference import require_served_model

    with handled():
        require_served_model(base_url, model, api_key)


def _carry_out(
    store: StoreContext,
    run_id: int,
    *,
    api_key: str | None,
    detach: bool,
    quiet: bool,
    endpoint_checked: bool = False,
) -> RunPublic:
    """Queue or run the open jobs of a run, then wait for it (unless detached).

    Ctrl-C (or SIGTERM) stops the jobs of this process at once, marks the run
    `interrupted` and exits 130; `cobalt run resume` continues from the stored turns.
    """
    from cobalt.orchestrator.runs import service
    from cobalt.orchestrator.worker.carrier import ThreadCarrier, queue_carrier
    from cobalt.orchestrator.worker.carry_out import carry_out_run
    from cobalt.orchestrator.worker.runtime import runtime

    sessions = store.sessions()
    queue = queue_carrier(store.settings)
    try:
        if queue is not None:
            with handled():
                carry_out_run(queue, sessions, run_id, api_key=api_key)
            if detach:
                return service.run_public(sessions, run_id)
            # Its jobs are on workers: marked interrupted, they stop before their next turn.
            with stopping_on_signals(lambda: None):
                return wait_for_run(sessions, run_id, quiet=quiet)
        if not endpoint_checked:
            with handled():
                run = service.run_public(sessions, run_id)
                has_work = bool(service.open_problem_ids(sessions, run_id))
            if has_work:  # a run with nothing left to do needs no endpoint
                _require_endpoint(run.base_url, run.model, api_key)
        with open_executor() as executor, RunProgress(sessions, run_id, quiet=quiet) as tick:
            with stopping_on_signals(runtime().interrupt), handled():
                carry_out_run(
                    ThreadCarrier(store.settings, executor.address()),
                    sessions,
                    run_id,
                    api_key=api_key,
                    on_job_done=lambda _problem, _error: tick.refresh(),
                )
            tick()
    except KeyboardInterrupt:
        with handled():
            service.interrupt_run(sessions, run_id)
        raise interrupted(
            f"run {run_id} stopped; `cobalt run resume {run_id}` continues it"
        ) from None
    with handled():
        return service.run_public(sessions, run_id)


def _finish(public: RunPublic, as_json: bool) -> None:
    if as_json:
        echo_json({"run_id": public.id, "status": public.status})
    else:
        _print_run(public)
    if public.status == RunStatus.INTERRUPTED:
        raise interrupted(f"run {public.id}; `cobalt run resume {public.id}` continues it")
    if public.status in (RunStatus.FAILED, RunStatus.CANCELLED):
        raise typer.Exit(EXIT_RUN_FAILED)


def _print_run(public: RunPublic) -> None:
    console = Console()
    table = Table(title=f"run {public.id} ({public.kind}, {public.status})", show_header=False)
    for key, value in (
        ("name", public.name),
        ("tags", " ".join(f"#{t}" for t in public.tags)),
        ("notes", public.notes),
        ("dataset", public.dataset),
        ("model", f"{public.model} at {public.base_url}"),
        ("policy", policy_line(public.policy)),
        ("parent run", public.parent_run_id),
        (
            "params",
            ", ".join(f"{k}={v}" for k, v in sorted(public.params.model_dump(mode="json").items())),
        ),
        ("template", f"{public.template_name} ({public.template_sha256[:12]})"),
        (
            "trajectories",
            f"{public.total_trajectories}: "
            + ", ".join(f"{n} {s}" for s, n in sorted(public.trajectories_by_status.items())),
        ),
        ("turns written", public.turns_written),
        ("error", public.error),
    ):
        if value not in (None, ""):
            table.add_row(key, str(value))
    console.print(table)


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


@run_app.command("sample")
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
    from cobalt.orchestrator.runs import service

    request = _request(SampleRunRequest, sampling_set, **settings)
    from cobalt.orchestrator.worker.carrier import queue_carrier

    store = _store(detach=detach)
    if queue_carrier(store.settings) is None:  # the jobs run here: this process must reach it
        from cobalt.orchestrator.datasets.catalog import dataset_summary

        with handled():  # an unknown dataset is a usage error (2), whatever the endpoint
            dataset_summary(store.sessions(), name=request.dataset, first=0)
        _require_endpoint(request.base_url, request.model, api_key)
    with handled():
        run_id = service.create_sample_run(
            store.sessions(), request, executor=executor_settings_or_exit()
        )
    _finish(
        _carry_out(
            store, run_id, api_key=api_key, detach=detach, quiet=as_json, endpoint_checked=True
        ),
        as_json,
    )


@run_app.command("refine")
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
    from cobalt.orchestrator.runs import service

    request = _request(RefineRunRequest, sampling_set, **settings)
    store = _store(detach=detach)
    from cobalt.orchestrator.worker.carrier import queue_carrier

    if queue_carrier(store.settings) is None:  # the jobs run here: check the model they ask
        with handled():
            parent = service.run_public(store.sessions(), request.from_run)
        _require_endpoint(
            request.base_url or parent.base_url, request.model or parent.model, api_key
        )
    with handled():
        run_id = service.create_refine_run(
            store.sessions(), request, executor=executor_settings_or_exit()
        )
    _finish(
        _carry_out(
            store, run_id, api_key=api_key, detach=detach, quiet=as_json, endpoint_checked=True
        ),
        as_json,
    )


@run_app.command("resume")
def resume(
    run_id: Annotated[int, typer.Argument(help="The run to continue.")],
    api_key: ApiKeyOption = None,
    as_json: JsonOption = False,
    detach: DetachOption = False,
) -> None:
    """Continue a stopped or failed run from the turns already stored."""
    from cobalt.orchestrator.runs import service

    store = _store(detach=detach)
    with handled():
        service.reopen_failed(store.sessions(), run_id)
    _finish(_carry_out(store, run_id, api_key=api_key, detach=detach, quiet=as_json), as_json)


@run_app.command("cancel")
def cancel(run_id: Annotated[int, typer.Argument()], as_json: JsonOption = False) -> None:
    """Stop a run; running jobs stop at their next turn (resume continues it)."""
    from cobalt.orchestrator.runs import service

    store = _store()
    with handled():
        service.cancel_run(store.sessions(), run_id)
        public = service.run_public(store.sessions(), run_id)
    if as_json:
        echo_json({"run_id": run_id, "status": public.status})
    else:
        typer.echo(f"run {run_id} cancelled")


@run_app.command("list")
def list_runs(
    limit: Annotated[int, typer.Option(help="Most recent runs shown.")] = 50,
    as_json: JsonOption = False,
) -> None:
    """The most recent runs."""
    from cobalt.orchestrator.runs import service

    store = _store()
    with handled():
        runs = service.list_runs(store.sessions(), limit=limit)
    if as_json:
        echo_json({"runs": [r.model_dump(mode="json") for r in runs]})
        return
    table = Table(
        "id",
        "name",
        "kind",
        "status",
        "dataset",
        "model",
        "policy",
        "trajectories",
        "turns",
        "created",
    )
    for r in runs:
        table.add_row(
            str(r.id),
            " ".join([r.name or "-", *(f"#{t}" for t in r.tags)]),
            r.kind,
            r.status,
            r.dataset,
            r.model,
            ",".join(f"v{v}" for v in r.policy_versions) or "-",
            f"{r.trajectories_by_status.get('finished', 0)}/{r.total_trajectories}",
            str(r.turns_written),
            r.created_at.strftime("%Y-%m-%d %H:%M"),
        )
    print_table(table)


@run_app.command("show")
def show(
    run_id: Annotated[int, typer.Argument()],
    problems: Annotated[
        bool, typer.Option("--problems", help="Also every problem: pass rates [95%], reward.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """A run; with --json also every trajectory's turns (messages, response, code, verdicts)."""
    from cobalt.orchestrator.runs import service

    store = _store()
    with handled():
        public = service.run_public(store.sessions(), run_id, with_turns=as_json)
    if as_json:
        echo_json(public.model_dump(mode="json"))
        return
    _print_run(public)
    if problems:
        from cobalt.orchestrator.results.cli import print_problems
        from cobalt.orchestrator.runs.browse import run_problems
        from cobalt.orchestrator.runs.evaluation import stored_report

        with handled():
            rows = run_problems(store.sessions(), run_id)
            report = stored_report(store.sessions(), run_id, ks=())
        print_problems(rows, report.unevaluated)


CHANGED_SHOWN = 20
"""Problems listed per change (fixed, broken) by `cobalt run compare`; --json has all."""


@run_app.command("compare")
def compare_runs(
    run_a: Annotated[int, typer.Argument(help="The baseline run (e.g. before training).")],
    run_b: Annotated[int, typer.Argument(help="The run to compare with it (same dataset).")],
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write it as CSV or JSON (by the suffix); '-' is stdout."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Which problems run B fixed and which it broke, turn by turn, from stored results.

    Fixed and broken count only changes larger than their noise (95% intervals,
    docs/analysis.md). Exits 1 when either run has no hidden results yet.
    """
    from cobalt.orchestrator.analysis.text import difference_text
    from cobalt.orchestrator.runs.comparison import compare_runs as compare_stored

    store = _store()
    with handled():
        comparison = compare_stored(store.sessions(), run_a, run_b)
    if as_json:
        echo_json(comparison.model_dump(mode="json"))
    missing = [r for r in (comparison.report_a, comparison.report_b) if r.pass_at_1 is None]
    for report in missing:
        typer.echo(
            f"error: run {report.run_id} has no hidden-test results to compare; "
            f"`{report.unevaluated}` measures them",
            err=True,
        )
    if missing:
        raise typer.Exit(EXIT_RUN_FAILED)
    if as_json:
        return
    if out is not None:
        from cobalt.orchestrator.results.cli import write_export
        from cobalt.orchestrator.results.exports import comparison_rows

        write_export(comparison, comparison_rows, out, None)
        return
    a, b = comparison.report_a, comparison.report_b
    changes = ("fixed", "broken", "within_noise", "unchanged", "unevaluated")
    table = Table(
        "turn",
        f"Pass@1 run {run_a}",
        f"Pass@1 run {run_b}",
        "B - A",
        *changes,
        title=f"run {run_b} against run {run_a} (hidden tests; [95% intervals])",
    )
    for turn, counts in enumerate(comparison.counts):
        table.add_row(
            str(turn),
            _rate_at(a, turn),
            _rate_at(b, turn),
            difference_text(comparison.difference[turn], comparison.difference_interval[turn]),
            *(str(counts.get(key, 0)) for key in changes),
        )
    print_table(table)
    for change in ("fixed", "broken"):
        names = [p.external_id for p in comparison.problems if p.change == change]
        if names:
            more = (
                f" (+{len(names) - CHANGED_SHOWN} more: --json)"
                if len(names) > CHANGED_SHOWN
                else ""
            )
            typer.echo(f"{change} at the last turn: {', '.join(names[:CHANGED_SHOWN])}{more}")
    noise = sum(p.change == "within_noise" for p in comparison.problems)
    if noise:
        typer.echo(f"{noise} problem(s) moved within their noise at the last turn (--json)")


def _rate_at(report: EvaluationReport, turn: int) -> str:
    from cobalt.orchestrator.analysis.text import rate_text

    rates, intervals = report.pass_at_1, report.pass_at_1_interval
    if rates is None or turn >= len(rates):
        return "-"
    return rate_text(rates[turn], intervals[turn] if intervals else None)


@run_app.command("evaluate")
def evaluate(
    run_id: Annotated[int, typer.Argument(help="The run to evaluate.")],
    k: Annotated[list[int] | None, typer.Option("--k", help="pass@k values (repeatable).")] = None,
    plot: Annotated[Path | None, typer.Option(help="Write Pass@1 per turn as a PNG.")] = None,
    compare: Annotated[
        list[int] | None, typer.Option("--compare", help="Other evaluated runs on the plot.")
    ] = None,
    tokenizer: Annotated[
        Path | None,
        typer.Option(
            "--tokenizer",
            help="The policy model's directory: also score and store every turn's Cobalt "
            "reward (turn_rewards). Default COBALT_REWARD_TOKENIZER, else "
            "COBALT_POLICY_TOKENIZER; with none, rewards are not scored.",
        ),
    ] = None,
    reward_format: Annotated[
        RewardFormat | None,
        typer.Option(
            "--reward-format",
            help="The format rules the rewards are scored with; default the run's "
            "(`run sample --reward-format`). Given, it becomes the run's while none of its "
            "turns is scored.",
        ),
    ] = None,
    report_to: Annotated[
        str | None,
        report_to_option("Also send Pass@1 per turn and the summary to these trackers", "none"),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run every turn's program on the hidden tests; Pass@1 per turn and pass@k, and with a
    tokenizer every turn's reward components."""
    from cobalt.orchestrator.runs import service
    from cobalt.orchestrator.runs.evaluation import evaluate_run
    from cobalt.orchestrator.runs.plots import plot_pass_at_1
    from cobalt.orchestrator.runs.tracking import report_evaluation
    from cobalt.shared.cli import settings_or_exit as shared_settings_or_exit
    from cobalt.shared.trackers import TrackerSettings, check_installed, parse_report_to

    trackers = shared_settings_or_exit(TrackerSettings, "COBALT_REPORT_TO, COBALT_TENSORBOARD_DIR")
    try:  # a tracker that is unknown or not installed: refused before any work
        check_installed(parse_report_to(report_to or trackers.report_to))
    except InvalidInput as exc:
        raise fail(EXIT_USAGE, f"--report-to (COBALT_REPORT_TO): {exc.message}") from exc
    store = _store()
    sessions = store.sessions()
    found = reward_tokenizer(tokenizer)
    if found is None:
        typer.echo(
            "note: rewards not scored; pass --tokenizer (the policy model's directory) or set "
            "COBALT_POLICY_TOKENIZER to store every turn's reward components",
            err=True,
        )
    reward_tokens, tokenizer_path = found or (None, None)
    with open_executor() as executor, handled():
        with progress_bar() as bars:
            task = bars.add_task(f"evaluating run {run_id}", total=None)
            report = evaluate_run(
                sessions,
                run_id,
                executor,
                ks=tuple(k or (1, 5, 10)),
                on_progress=lambda done, total: bars.update(task, completed=done, total=total),
                reward_tokens=reward_tokens,
                tokenizer=str(tokenizer_path or ""),
                reward_format=reward_format,
            )
        others: list[EvaluationReport] = [
            evaluate_run(sessions, other, executor) for other in (compare or [])
        ]
    if plot is not None:
        plot_pass_at_1([report, *others], plot)
    with handled():
        reported = report_evaluation(
            service.run_public(sessions, run_id), report, report_to, trackers
        )
    if as_json:
        echo_json(report.model_dump(mode="json"))
        return
    if report.pass_at_1 is None or report.public_pass_at_1 is None:
        typer.echo(f"run {run_id}: no problem of it has hidden tests; nothing to measure")
        return
    table = Table(
        "turn",
        "Pass@1 (hidden) [95%]",
        *(f"pass@{key}" for key in report.pass_at_k),
        "Pass@1 (public)",
        *(["mean reward"] if report.mean_reward is not None else []),
        title=f"run {run_id}: {report.problems} problems x {report.samples} samples",
    )
    for turn in range(report.turns):
        reward = report.mean_reward[turn] if report.mean_reward is not None else None
        table.add_row(
            str(turn),
            _rate_at(report, turn),
            *(f"{values[turn]:.3f}" for values in report.pass_at_k.values()),
            f"{report.public_pass_at_1[turn]:.3f}",
            *([] if report.mean_reward is None else ["-" if reward is None else f"{reward:+.3f}"]),
        )
    print_table(table)
    if report.failed_trajectories:
        typer.echo(f"{report.failed_trajectories} trajectories failed (see `cobalt run show`)")
    if report.turns_without_feedback:
        typer.echo(
            f"{report.turns_without_feedback} feedback turns had no test feedback to act on "
            "(their problems have no public test)"
        )
    if plot is not None:
        typer.echo(f"plot written to {plot}")
    if reported:
        typer.echo(f"reported to {', '.join(reported)}")


# `cobalt run table/export/label/trajectory`: results read from the store (results.cli).
from cobalt.orchestrator.results.cli import register_run_commands  # noqa: E402

register_run_commands(run_app)
