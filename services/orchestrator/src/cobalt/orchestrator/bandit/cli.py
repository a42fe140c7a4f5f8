"""`cobalt bandit build|show|list|export|delete`: contextual-bandit datasets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from cobalt.orchestrator.bandit.options import (
    DEFAULT_MAX_PROMPT_TOKENS,
    DEFAULT_SEED,
    ExportFormat,
)
from cobalt.orchestrator.bandit.selection import (
    DEFAULT_FIRST_STOP_TURNS,
    DEFAULT_KEEP,
    RESEARCH_FIRST_STOP_TURNS,
)
from cobalt.orchestrator.console import (
    EXIT_USAGE,
    JsonOption,
    echo_json,
    fail,
    handled,
    store_context,
)

# The builder, the exporter and the store are imported by the commands that use them, so
# that `cobalt bandit --help` loads none of SQLAlchemy, pyarrow, jinja2 or tokenizers.

__all__ = ["bandit_app"]

bandit_app = typer.Typer(
    help=(
        "Contextual-bandit datasets: partial trajectories of an evaluated refine run as "
        "prompts for single-step training (docs/method.md's builder), shown and exported for "
        "verl."
    ),
    no_args_is_help=True,
)


def _mix(values: list[str]) -> tuple[tuple[str, float], ...]:
    mixed = []
    for value in values:
        name, sep, ratio = value.rpartition(":")
        try:
            parsed = float(ratio)
        except ValueError:
            parsed = -1.0
        if not sep or not name or parsed < 0:
            raise fail(
                EXIT_USAGE,
                f"--mix {value!r}: write NAME:RATIO, e.g. perturbed:0.5 (RATIO contexts of NAME "
                "per context of this dataset, 0 or more)",
            )
        mixed.append((name, parsed))
    return tuple(mixed)


@bandit_app.command("build")
def build(
    run: Annotated[int, typer.Option("--run", help="A finished, evaluated refine run.")],
    name: Annotated[str, typer.Option("--name", help="Name of the new bandit dataset.")],
    tokenizer: Annotated[
        Path,
        typer.Option(
            "--tokenizer",
            envvar="COBALT_POLICY_TOKENIZER",
            help="The policy model's directory (tokenizer.json and its chat template); "
            "prompts over --max-tokens tokens with it are dropped.",
        ),
    ],
    validation: Annotated[
        bool, typer.Option("--validation", help="One context per problem (validation set).")
    ] = False,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", min=1, help="Longest rendered prompt kept.")
    ] = DEFAULT_MAX_PROMPT_TOKENS,
    keep: Annotated[
        int, typer.Option("--keep", min=1, help="m: trajectories kept per problem.")
    ] = DEFAULT_KEEP,
    seed: Annotated[
        int, typer.Option(help="Seed of the shuffle and of the mixing.")
    ] = DEFAULT_SEED,
    mix: Annotated[
        list[str] | None,
        typer.Option(
            "--mix",
            help="NAME:RATIO mixes in RATIO contexts of bandit dataset NAME (built from a "
            "perturbed dataset's run) per own context; repeatable.",
        ),
    ] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace a dataset of that name.")] = (
        False
    ),
    research_first_stop: Annotated[
        bool,
        typer.Option(
            "--research-first-stop",
            help="Parity with the research script: stop a trajectory at its first context "
            "when turns 0 and 2 pass every test (default: turns 0 and 1, as docs/method.md).",
        ),
    ] = False,
    research_validation: Annotated[
        bool,
        typer.Option(
            "--research-validation",
            help="With --validation, parity with the research script: the turn-0 context "
            "plus the chosen trajectory's contexts after 1, 2, 3 turns (default: one "
            "context of up to 8 messages per problem).",
        ),
    ] = False,
    turn_zero_only: Annotated[
        bool,
        typer.Option(
            "--turn-zero-only",
            help="Build from a run without feedback turns (a sample run): turn-0 contexts "
            "only, the single-turn baseline. Without it such a run is refused (exit 2).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Build contexts from a refine run (2 feedback turns) and its hidden-test evaluation."""
    from cobalt.orchestrator.bandit.builder import BuildOptions, build_bandit_dataset
    from cobalt.orchestrator.bandit.prompt_length import PromptTokenCounter

    if research_validation and not validation:
        raise fail(EXIT_USAGE, "--research-validation shapes a validation set: add --validation")
    options = BuildOptions(
        validation=validation,
        keep=keep,
        max_prompt_tokens=max_tokens,
        seed=seed,
        mix=_mix(mix or []),
        tokenizer=str(tokenizer),
        first_stop_turns=RESEARCH_FIRST_STOP_TURNS
        if research_first_stop
        else DEFAULT_FIRST_STOP_TURNS,
        research_validation=research_validation,
        turn_zero_only=turn_zero_only,
    )
    store = store_context()
    with handled():
        counter = PromptTokenCounter.from_dir(tokenizer)
        result = build_bandit_dataset(
            store.sessions(),
            run_id=run,
            name=name,
            options=options,
            count_tokens=counter.count,
            replace=replace,
        )
    store.close()
    if as_json:
        echo_json({"name": result.name, "contexts": result.contexts, "counts": result.counts})
        return
    typer.echo(f"bandit dataset {result.name!r}: {result.contexts} contexts")
    _print_counts(result.counts)


def _print_counts(counts: dict[str, object]) -> None:
    table = Table(title="what each rule kept and dropped")
    table.add_column("rule")
    table.add_column("count", justify="right")
    for rule, value in counts.items():
        if isinstance(value, dict):
            for other, n in value.items():
                table.add_row(f"{rule}: {other}", str(n))
        else:
            table.add_row(rule.replace("_", " "), str(value))
    Console().print(table)


@bandit_app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="The bandit dataset.")],
    limit: Annotated[int, typer.Option(help="Contexts listed (all with --json).")] = 20,
    as_json: JsonOption = False,
) -> None:
    """A dataset's settings, rule counts and contexts (provenance, prev_best, tokens)."""
    from cobalt.orchestrator.store import repo_bandit

    store = store_context()
    with handled(), store.sessions()() as session:
        dataset = repo_bandit.get_bandit_dataset(session, name=name)
        contexts = repo_bandit.contexts_of(session, dataset_id=dataset.id)
        summary = {
            "name": dataset.name,
            "split": dataset.split,
            "source_run_id": dataset.source_run_id,
            "params": dataset.params.model_dump(mode="json"),
            "counts": dataset.counts,
            "contexts": len(contexts),
        }
        listed = [
            {
                "position": c.position,
                "problem_id": c.problem_id,
                "source_run_id": c.source_run_id,
                "trajectory_id": c.trajectory_id,
                "assistant_turns": c.assistant_turns,
                "prev_best": c.prev_best,
                "prompt_tokens": c.prompt_tokens,
                "template_sha256": c.template_sha256,
                "mixed_from_id": c.mixed_from_id,
                "messages": c.messages,
            }
            for c in contexts
        ]
    store.close()
    if as_json:
        echo_json(summary | {"context_list": listed})
        return
    typer.echo(
        f"{summary['name']}: {summary['contexts']} {summary['split']} contexts from run "
        f"{summary['source_run_id']}"
    )
    _print_counts(dataset.counts)
    table = Table(title=f"contexts (first {min(limit, len(listed))})")
    for column in ("#", "problem", "trajectory", "turns", "prev_best", "tokens", "mixed from"):
        table.add_column(column, justify="right")
    for c in listed[:limit]:
        table.add_row(
            str(c["position"]),
            str(c["problem_id"]),
            str(c["trajectory_id"] or "-"),
            str(c["assistant_turns"]),
            f"{c['prev_best']:.3f}",
            str(c["prompt_tokens"]),
            str(c["mixed_from_id"] or "-"),
        )
    Console().print(table)


@bandit_app.command("list")
def list_datasets(as_json: JsonOption = False) -> None:
    """Every bandit dataset, newest first."""
    from cobalt.orchestrator.store import repo_bandit

    store = store_context()
    with handled(), store.sessions()() as session:
        rows = [
            {
                "name": d.name,
                "split": d.split,
                "source_run_id": d.source_run_id,
                "contexts": n,
                "created_at": d.created_at.isoformat(),
            }
            for d, n in repo_bandit.list_bandit_datasets(session)
        ]
    store.close()
    if as_json:
        echo_json({"bandit_datasets": rows})
        return
    table = Table()
    for column in ("name", "split", "run", "contexts", "created"):
        table.add_column(column)
    for row in rows:
        table.add_row(
            str(row["name"]),
            str(row["split"]),
            str(row["source_run_id"]),
            str(row["contexts"]),
            str(row["created_at"])[:19],
        )
    Console().print(table)


@bandit_app.command("export")
def export(
    name: Annotated[str, typer.Argument(help="The bandit dataset.")],
    out: Annotated[Path, typer.Option("--out", help="Directory to write into.")],
    export_format: Annotated[
        ExportFormat, typer.Option("--format", help="verl: parquet for verl; jsonl.")
    ] = ExportFormat.VERL,
    as_json: JsonOption = False,
) -> None:
    """Write a dataset as verl parquet (train.parquet / validation.parquet) or JSON lines."""
    from cobalt.orchestrator.bandit.export import export_bandit_dataset

    store = store_context()
    with handled(), store.sessions()() as session:
        path = export_bandit_dataset(session, name=name, export_format=export_format, out_dir=out)
    store.close()
    if as_json:
        echo_json({"name": name, "path": str(path)})
    else:
        typer.echo(f"wrote {path}")


@bandit_app.command("delete")
def delete(name: Annotated[str, typer.Argument(help="The bandit dataset.")]) -> None:
    """Delete a dataset and its contexts (the run it came from is kept)."""
    from cobalt.orchestrator.store import repo_bandit

    store = store_context()
    with handled(), store.sessions().begin() as session:
        repo_bandit.delete_bandit_dataset(session, name=name)
    store.close()
    typer.echo(f"deleted {name}")
