"""`cobalt run compare/table/export/label/trajectory` and `cobalt train metrics`: results
read from the store, as text or as files.

Each joins its group by an entry point (`run.table`, `train.metrics`: the orchestrator's
pyproject.toml). Like every command module, nothing heavy is imported at load time (the
store, the contracts and numpy are imported by the command that runs).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.table import Table

from cobalt.orchestrator.console import (
    EXIT_USAGE,
    JsonOption,
    echo_json,
    fail,
    handled,
    settings_or_exit,
    store_context,
)
from cobalt.shared.tables import print_table

if TYPE_CHECKING:
    from pydantic import BaseModel
    from sqlalchemy.orm import Session, sessionmaker

    from cobalt.shared.contracts.browse import TrajectoryDetail
    from cobalt.shared.reward_format import RewardFormat

_Body = TypeVar("_Body", bound="BaseModel")

__all__ = ["compare", "export", "export_job", "label", "table", "trajectory", "write_export"]

EXIT_NOT_EVALUATED = 1
"""A table or export of runs with no hidden results: the command ran, the figures do not
exist yet (docs/cli.md)."""

OutOption = Annotated[
    Path | None,
    typer.Option(
        "--out", help="Write a file: CSV or JSON by its suffix (.csv, .json); '-' is stdout."
    ),
]
FormatOption = Annotated[
    str | None,
    typer.Option("--format", help="csv or json (default: the --out suffix, else csv)."),
]


def write_export(
    body: _Body, rows: Callable[[_Body], list[dict[str, Any]]], out: Path | None, form: str | None
) -> None:
    """`body` as JSON or `rows(body)` as CSV (`exports.export_text`, as the REST routes
    serve them), to `out` (or stdout)."""
    from cobalt.orchestrator.results.exports import ExportFormat, export_text

    chosen = (form or (out.suffix.lstrip(".") if out and str(out) != "-" else "") or "csv").lower()
    if chosen not in {f.value for f in ExportFormat}:
        raise fail(EXIT_USAGE, f"--format: csv or json, not {chosen!r} (or name --out *.csv)")
    text = export_text(body, rows, ExportFormat(chosen), indent=2)
    text += "\n" if chosen == ExportFormat.JSON else ""
    if out is None or str(out) == "-":
        sys.stdout.write(text)
        return
    if not out.parent.is_dir():
        raise fail(EXIT_USAGE, f"--out: the folder {out.parent} does not exist")
    out.write_text(text, encoding="utf-8")
    typer.echo(f"{chosen.upper()} written to {out}", err=True)


def _rate(rate: float | None, interval: tuple[float, float] | None) -> str:
    from cobalt.orchestrator.analysis.text import rate_text

    return rate_text(rate, interval)


def table(
    runs: Annotated[list[int], typer.Argument(help="The runs, in the table's order.")],
    out: OutOption = None,
    form: FormatOption = None,
    as_json: JsonOption = False,
    per_turn: Annotated[
        bool,
        typer.Option("--per-turn", help="Pass@1 [95%] at every turn, a column per turn."),
    ] = False,
) -> None:
    """Several runs side by side: Pass@1 at turn 0 and the last turn [95% intervals], per
    difficulty where the dataset has difficulties (--per-turn: at every turn). Exits 1 if a
    run is not evaluated."""
    from cobalt.orchestrator.results.exports import table_rows
    from cobalt.orchestrator.results.table import run_table

    store = store_context(settings_or_exit())
    if per_turn:
        if out is not None or form is not None:
            raise fail(EXIT_USAGE, "--per-turn prints the table (or --json); drop --out/--format")
        _per_turn_table(store.sessions(), runs, as_json=as_json)
        return
    with handled():
        result = run_table(store.sessions(), runs)
    if as_json:
        echo_json(result.model_dump(mode="json"))
    elif out is not None or form is not None:
        write_export(result, table_rows, out, form)
    else:
        shown = Table(
            "run",
            "name",
            "dataset",
            "model",
            "problems x n",
            "Pass@1 turn 0 [95%]",
            "Pass@1 last [95%]",
            *(f"{level} (last)" for level in result.difficulties),
            title="runs side by side (hidden tests)",
        )
        for row in result.rows:
            levels = [row.by_difficulty.get(level) for level in result.difficulties]
            shown.add_row(
                f"{row.run.id} ({row.run.kind}, {row.turns} turns)",
                row.run.name or "-",
                row.run.dataset,
                row.run.model,
                f"{row.problems} x {row.samples}",
                _rate(row.pass_at_1_first, row.pass_at_1_first_interval),
                _rate(row.pass_at_1_last, row.pass_at_1_last_interval),
                *(
                    "-" if c is None else f"{_rate(c.pass_at_1, c.interval)} ({c.problems})"
                    for c in levels
                ),
            )
        print_table(shown)
    missing = [row for row in result.rows if row.unevaluated]
    for row in missing:
        typer.echo(f"run {row.run.id} is not evaluated: `{row.unevaluated}` measures it", err=True)
    if missing:
        raise typer.Exit(EXIT_NOT_EVALUATED)


def _per_turn_table(sessions: sessionmaker[Session], runs: list[int], *, as_json: bool) -> None:
    """`run table --per-turn`: each run's Pass@1 [95%] at every turn (its stored report)."""
    from cobalt.orchestrator.analysis.text import rate_text
    from cobalt.orchestrator.runs.evaluation import stored_report

    with handled():
        reports = [stored_report(sessions, run, ks=()) for run in runs]
    if as_json:
        echo_json({"runs": [report.model_dump(mode="json") for report in reports]})
    else:
        turns = max(report.turns for report in reports)
        shown = Table("run", *(f"turn {t} [95%]" for t in range(turns)), title="Pass@1 by turn")
        for report in reports:
            rates, intervals = report.pass_at_1 or [], report.pass_at_1_interval or []
            shown.add_row(
                str(report.run_id),
                *(
                    rate_text(rates[t], intervals[t]) if t < len(rates) else "-"
                    for t in range(turns)
                ),
            )
        print_table(shown)
    missing = [report for report in reports if report.unevaluated]
    for report in missing:
        typer.echo(
            f"run {report.run_id} is not evaluated: `{report.unevaluated}` measures it", err=True
        )
    if missing:
        raise typer.Exit(EXIT_NOT_EVALUATED)


CHANGED_SHOWN = 20
"""Problems listed per change (fixed, broken) by `cobalt run compare`; --json has all."""


def compare(
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
    docs/analysis.md); the verdict on B - A needs at least 10 problems both runs evaluated.
    Exits 1 when either run has no hidden results yet.
    """
    from cobalt.orchestrator.analysis.text import difference_text, verdict_text
    from cobalt.orchestrator.results.exports import comparison_rows
    from cobalt.orchestrator.runs.cli import rate_at
    from cobalt.orchestrator.runs.comparison import compare_runs

    store = store_context(settings_or_exit())
    with handled():
        comparison = compare_runs(store.sessions(), run_a, run_b)
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
        raise typer.Exit(EXIT_NOT_EVALUATED)
    if as_json:
        return
    if out is not None:
        write_export(comparison, comparison_rows, out, None)
        return
    a, b = comparison.report_a, comparison.report_b
    changes = ("fixed", "broken", "within_noise", "unchanged", "unevaluated")
    shown = Table(
        "turn",
        f"Pass@1 run {run_a}",
        f"Pass@1 run {run_b}",
        "B - A",
        "verdict",
        *changes,
        title=f"run {run_b} against run {run_a} (hidden tests; [95% intervals])",
    )
    for turn, counts in enumerate(comparison.counts):
        shown.add_row(
            str(turn),
            rate_at(a, turn),
            rate_at(b, turn),
            difference_text(comparison.difference[turn], comparison.difference_interval[turn]),
            verdict_text(comparison.verdict[turn], comparison.paired_problems[turn]),
            *(str(counts.get(key, 0)) for key in changes),
        )
    print_table(shown)
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


def export(
    run_id: Annotated[int, typer.Argument(help="The run.")],
    out: OutOption = None,
    form: FormatOption = None,
    turns: Annotated[
        bool,
        typer.Option(
            "--turns",
            help="One row per turn (response, program, verdicts, per-test outputs, reward "
            "components, policy) to --out FILE.parquet, .jsonl or .jsonl.gz.",
        ),
    ] = False,
) -> None:
    """A run's per-problem results (pass rates with Wilson intervals) as CSV or JSON, or
    with --turns every turn as Parquet or JSONL."""
    from cobalt.orchestrator.results.exports import problem_rows
    from cobalt.orchestrator.runs.browse import run_problems

    store = store_context(settings_or_exit())
    if turns:
        from cobalt.orchestrator.results.turn_export import export_run_turns

        if out is None or str(out) == "-" or form is not None:
            raise fail(EXIT_USAGE, "--turns writes a file: give --out FILE.parquet or .jsonl")
        with handled():
            written = export_run_turns(store.sessions(), run_id, out)
        typer.echo(f"{written} turns of run {run_id} written to {out}")
        return
    with handled():
        problems = run_problems(store.sessions(), run_id)
    write_export(problems, problem_rows, out, form)


def label(
    run_id: Annotated[int, typer.Argument(help="The run.")],
    name: Annotated[str | None, typer.Option(help='What to call it ("" clears).')] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="Add a tag (repeatable).")] = None,
    untag: Annotated[
        list[str] | None, typer.Option("--untag", help="Remove a tag (repeatable).")
    ] = None,
    notes: Annotated[str | None, typer.Option(help='Notes on the run ("" clears).')] = None,
    as_json: JsonOption = False,
) -> None:
    """Name a run, tag it, write notes on it (shown by list, show, table and the UI)."""
    from pydantic import ValidationError

    from cobalt.orchestrator.results.labels import label_run
    from cobalt.orchestrator.runs.service import run_public
    from cobalt.shared.contracts.results import RunLabels
    from cobalt.shared.errors import first_validation_error_parts

    try:
        labels = RunLabels(name=name, add_tags=tag or [], remove_tags=untag or [], notes=notes)
    except ValidationError as exc:
        where, message = first_validation_error_parts(exc)
        option = {"add_tags": "tag", "remove_tags": "untag"}.get(where.split(".")[0], where)
        raise fail(EXIT_USAGE, f"--{option}: {message}") from exc
    store = store_context(settings_or_exit())
    with handled():
        label_run(store.sessions(), run_id, labels)
        public = run_public(store.sessions(), run_id)
    if as_json:
        echo_json(public.model_dump(mode="json"))
        return
    tags = " ".join(f"#{t}" for t in public.tags) or "no tags"
    typer.echo(f"run {run_id}: {public.name or '(no name)'}, {tags}")


def _verdicts(verdicts: list[str] | None, passed: bool | None) -> str:
    if verdicts is None or passed is None:
        return "not evaluated"
    failing = [f"{i + 1}: {v}" for i, v in enumerate(verdicts) if v != "accepted"]
    head = f"{'pass' if passed else 'fail'} ({len(verdicts) - len(failing)}/{len(verdicts)})"
    return head + (f", {', '.join(failing[:5])}" if failing else "")


def _print_trajectory(
    trajectory: TrajectoryDetail, *, reasoning: bool, reward_format: RewardFormat
) -> None:
    console = Console(highlight=False, soft_wrap=True)
    for turn in trajectory.turns:
        console.rule(f"turn {turn.turn_index}")
        console.print(f"public tests: {_verdicts(turn.public_verdicts, turn.public_passed)}")
        console.print(f"hidden tests: {_verdicts(turn.hidden_verdicts, turn.hidden_passed)}")
        if turn.reward is not None:
            console.print(
                f"reward: {turn.reward.total:+.3f} (pass rate {turn.reward.pass_rate:.3f}, "
                f"{reward_format} format rules)"
            )
        if turn.reasoning:
            if reasoning:
                console.print("reasoning:", markup=False)
                console.print(turn.reasoning, markup=False)
            else:
                console.print(f"reasoning: {len(turn.reasoning)} characters (--reasoning shows it)")
        if turn.diff == "":
            console.print("program: the same as the previous turn's", markup=False)
        elif turn.diff:
            console.print("change from the previous turn:", markup=False)
            console.print(turn.diff.rstrip("\n"), markup=False)
        elif turn.code is not None:
            console.print("program:", markup=False)
            console.print(turn.code.rstrip("\n"), markup=False)
        else:
            console.print("no program in the answer:", markup=False)
            console.print(turn.answer, markup=False)
        if turn.feedback:
            console.print("feedback shown to the model next:", markup=False)
            console.print(turn.feedback.rstrip("\n"), markup=False)


def trajectory(
    run_id: Annotated[int, typer.Argument(help="The run.")],
    problem: Annotated[str, typer.Argument(help="The problem's id (`run show ID --problems`).")],
    sample: Annotated[int, typer.Option(help="Which of its n samples.")] = 0,
    reasoning: Annotated[bool, typer.Option("--reasoning", help="Print the reasoning.")] = False,
    as_json: JsonOption = False,
) -> None:
    """One trajectory turn by turn: verdicts, reward, program (then its diff), feedback."""
    from cobalt.orchestrator.runs.browse import run_problem_detail

    store = store_context(settings_or_exit())
    with handled():
        detail = run_problem_detail(store.sessions(), run_id, problem)
    found = [t for t in detail.trajectories if t.sample_index == sample]
    if not found:
        samples = ", ".join(str(t.sample_index) for t in detail.trajectories) or "none"
        raise fail(
            EXIT_USAGE, f"--sample {sample}: {problem} has samples {samples} in run {run_id}"
        )
    if as_json:
        echo_json(found[0].model_dump(mode="json"))
        return
    chosen = found[0]
    typer.echo(
        f"run {run_id}, {problem} ({detail.difficulty or 'no difficulty'}), sample {sample}: "
        f"{chosen.status}, {len(chosen.turns)} turns"
        + (f"; error: {chosen.error}" if chosen.error else "")
    )
    _print_trajectory(chosen, reasoning=reasoning, reward_format=detail.reward_format)


def export_job(
    job_id: Annotated[int, typer.Argument(help="The training job.")],
    out: OutOption = None,
    form: FormatOption = None,
) -> None:
    """A training job's step metrics, one row per step, as CSV or JSON."""
    from cobalt.orchestrator.results.exports import job_metric_rows
    from cobalt.orchestrator.training.service import job_public

    store = store_context(settings_or_exit())
    with handled():
        job = job_public(store.sessions(), job_id)
    write_export(job, job_metric_rows, out, form)
