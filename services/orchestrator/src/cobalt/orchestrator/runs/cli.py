"""`cobalt run`: the group, and its commands that read or change stored runs: list, show,
cancel, evaluate.

The group's other commands join it by entry points (`run.NAME`, the orchestrator's
pyproject.toml): sample, refine and resume carry work out (`worker/cli.py`), compare,
table, export, label and trajectory read results (`results/cli.py`). With `--json`, each
command prints one JSON object on stdout (the contract scripts use); tables and bars go
to the terminal.

Exit statuses (docs/cli.md): 0 done; 1 the run ended with failed trajectories (or was
cancelled); 2 usage; 3 a service (the model endpoint among them) cannot be reached;
130 interrupted: Ctrl-C marks the run `interrupted` and `cobalt run resume` continues it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.table import Table

from cobalt.orchestrator.console import (
    EXIT_USAGE,
    JsonOption,
    StoreContext,
    echo_json,
    fail,
    handled,
    open_executor,
    progress_bar,
    report_to_option,
    reward_tokenizer,
    settings_or_exit,
    store_context,
)
from cobalt.shared.errors import InvalidInput
from cobalt.shared.reward_format import RewardFormat
from cobalt.shared.tables import print_table
from cobalt.shared.weight_identity import policy_line

# The commands import the store, the run service and the contracts when they run, so that
# `cobalt run --help` loads none of SQLAlchemy, the OpenAI client, RQ or matplotlib.
if TYPE_CHECKING:
    from cobalt.shared.contracts.browse import RunProblemsPublic
    from cobalt.shared.contracts.runs import EvaluationReport, RunPublic

__all__ = ["print_run", "rate_at", "run_app"]

run_app = typer.Typer(
    help="Rollout runs: sample, refine, evaluate, compare; list, show, cancel, resume.",
    no_args_is_help=True,
)


def _store() -> StoreContext:
    return store_context(settings_or_exit())


def print_run(public: RunPublic) -> None:
    """The run as a table."""
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
    print_run(public)
    if problems:
        from cobalt.orchestrator.runs.browse import run_problems
        from cobalt.orchestrator.runs.evaluation import stored_report

        with handled():
            rows = run_problems(store.sessions(), run_id)
            report = stored_report(store.sessions(), run_id, ks=())
        print_problems(rows, report.unevaluated)


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
            rate_at(report, turn),
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


def rate_at(report: EvaluationReport, turn: int) -> str:
    """Pass@1 [95%] of the report at `turn`, '-' where it has none."""
    from cobalt.orchestrator.analysis.text import rate_text

    rates, intervals = report.pass_at_1, report.pass_at_1_interval
    if rates is None or turn >= len(rates):
        return "-"
    return rate_text(rates[turn], intervals[turn] if intervals else None)


def print_problems(problems: RunProblemsPublic, unevaluated: str | None) -> None:
    """`cobalt run show ID --problems`: one line per problem."""
    from cobalt.orchestrator.analysis.text import rate_text

    shown = Table(
        "problem",
        "difficulty",
        "outcome",
        "samples",
        "turns",
        "pass turn 0 [95%]",
        "pass last [95%]",
        "public last",
        "reward",
        "flagged",
        "failed",
        title=f"run {problems.run_id}: {problems.total} problems (hidden tests)",
    )
    for p in problems.items:
        shown.add_row(
            p.external_id,
            p.difficulty or "-",
            p.outcome.value,
            str(p.samples),
            str(p.turns),
            rate_text(p.hidden_pass_first, p.hidden_pass_first_interval),
            rate_text(p.hidden_pass_last, p.hidden_pass_last_interval),
            rate_text(p.public_pass_last),
            "-" if p.mean_reward is None else f"{p.mean_reward:+.3f}",
            str(p.flagged),
            str(p.failed),
        )
    print_table(shown)
    if unevaluated:
        typer.echo(f"no hidden-test results yet: `{unevaluated}` measures them")
