"""`cobalt data generate` and `cobalt data screen`: generated problems from the command
line (the `data` group registers both; docs/datasets.md, "Generated problems").

Parse, call the generator or the screening, print. Exit statuses as for every `cobalt
data` command (cobalt.orchestrator.datasets.cli).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cobalt.orchestrator.console import EXIT_USAGE, data_context, open_executor
from cobalt.orchestrator.console import echo_json as _echo_json
from cobalt.orchestrator.console import fail as _fail
from cobalt.orchestrator.console import handled as _handled
from cobalt.orchestrator.datasets.import_report import (
    import_executor,
    print_import,
    report_json,
)

if TYPE_CHECKING:
    from cobalt.orchestrator.datasets.importing import Executor

__all__ = ["generate_command", "screen_command"]

EXIT_NOTHING_IMPORTED = 1


# --- cobalt data generate -----------------------------------------------------------------


def _check_spec(spec: dict[str, Any]) -> None:
    """Refuse a bad option before anything is written (exit 2, naming the option)."""
    from pydantic import ValidationError

    from cobalt.orchestrator.datasets.generated.instances import GenerationSpec
    from cobalt.shared.errors import first_validation_error_parts

    try:
        GenerationSpec.model_validate(spec)
    except ValidationError as exc:
        option, message = first_validation_error_parts(exc, where="spec")
        raise _fail(EXIT_USAGE, f"--{option.split('.')[0]}: {message}") from exc


def generate_command(
    ctx: typer.Context,
    split: Annotated[
        str,
        typer.Option(
            "--split",
            help="train, validation or heldout. A task (template + constants) belongs to one "
            "split, decided by its hash: the splits never share a task, whatever the seeds.",
            show_default=False,
        ),
    ],
    count: Annotated[int, typer.Option("--count", min=1, help="Problems to draw.")],
    name: Annotated[
        str | None,
        typer.Option("--name", help="Dataset to import into [gen-FAMILY-SPLIT-dDIFFICULTY]."),
    ] = None,
    family: Annotated[
        str,
        typer.Option(
            "--family",
            help="basic (every family) or one of: arithmetic, strings, lists, conditionals, "
            "dictionaries, compositions.",
        ),
    ] = "basic",
    seed: Annotated[int, typer.Option(help="Seed of the draw: same seed, same problems.")] = 0,
    difficulty: Annotated[
        int,
        typer.Option(
            min=1, max=3, help="1-3: wider constants, negative and longer inputs as it grows."
        ),
    ] = 1,
    templates: Annotated[
        str | None,
        typer.Option(
            "--templates",
            help="Comma-separated template names to draw from (e.g. a screening's kept ones).",
        ),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check/--no-check",
            help="Run every reference solution on its tests first (COBALT_EXECUTOR_URL's "
            "executor, or a local one); a failing problem is reported, not imported.",
        ),
    ] = True,
    spec_out: Annotated[
        Path | None,
        typer.Option(
            "--spec-out",
            help="Also keep the spec here: `cobalt data import --format generated` of it "
            "imports the same problems again.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the report as one JSON object.")
    ] = False,
) -> None:
    """Draw COUNT generated problems ("Write a Python function `f(x)` that ...") and import
    them as dataset --name, like any import (docs/datasets.md, "Generated problems").

    Each problem has one public test (feedback turns), hidden tests with edge cases (the
    verdict) and its reference solution in its metadata. Exit status: 0 done, 1 nothing
    valid, 2 bad input (unknown family or template, too many problems for the split),
    3 database or executor unreachable.
    """
    import tempfile

    from cobalt.orchestrator.datasets.importing import ImportOptions, import_file

    spec: dict[str, Any] = {
        "family": family,
        "split": split,
        "seed": seed,
        "count": count,
        "difficulty": difficulty,
    }
    if templates:
        spec["templates"] = [part.strip() for part in templates.split(",") if part.strip()]
    _check_spec(spec)
    dataset = name or f"gen-{family}-{split}-d{difficulty}"
    context = data_context(ctx)
    sessions = context.sessions()
    with tempfile.TemporaryDirectory() as folder:
        path = spec_out or Path(folder) / f"{dataset}.json"
        with _handled():
            path.write_text(json.dumps(spec, indent=2) + "\n", encoding="utf-8")
        with import_executor(check) as executor, _handled():
            report = import_file(
                sessions=sessions,
                name=dataset,
                fmt="generated",
                path=path,
                options=ImportOptions(verify=check, executor=executor),
                batch_size=context.settings.import_batch_size,
            )
    if as_json:
        _echo_json(report_json(report, "generated"))
    else:
        print_import(report, "generated")
    if report.read and len(report.bad) == report.read:
        raise _fail(EXIT_NOTHING_IMPORTED, "no generated problem passed its check")


# --- cobalt data screen -------------------------------------------------------------------


def screen_command(
    base_url: Annotated[
        str, typer.Option("--base-url", help="The base model's OpenAI-compatible URL (.../v1).")
    ],
    model: Annotated[str, typer.Option("--model", help="The base model's served name.")],
    family: Annotated[str, typer.Option("--family", help="basic or one family.")] = "basic",
    difficulty: Annotated[int, typer.Option(min=1, max=3, help="Difficulty 1-3.")] = 1,
    seed: Annotated[int, typer.Option(help="Seed of the train instances screened.")] = 0,
    instances: Annotated[int, typer.Option(min=1, help="Train instances per template.")] = 4,
    n: Annotated[int, typer.Option(min=1, help="Samples per instance.")] = 8,
    low: Annotated[float, typer.Option(min=0, max=1, help="Keep when p >= LOW.")] = 0.1,
    high: Annotated[float, typer.Option(min=0, max=1, help="Keep when p <= HIGH.")] = 0.9,
    temperature: Annotated[
        float, typer.Option(min=0, max=2, help="The training temperature.")
    ] = 1.0,
    top_p: Annotated[float, typer.Option(min=0.01, max=1)] = 0.95,
    max_tokens: Annotated[int, typer.Option(min=16, help="Tokens per answer.")] = 256,
    template: Annotated[str, typer.Option(help="Prompt template (name or path).")] = "brief",
    stop_at_code_end: Annotated[
        bool, typer.Option("--stop-at-code-end/--no-stop", help="End answers at their code.")
    ] = True,
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the result as JSON here.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Screen the generated templates by a base model: sample N answers to INSTANCES train
    instances of each, judge them on the hidden tests, keep templates with LOW <= p <= HIGH.

    The rule is fixed by the options before anything is sampled and printed with the
    result; the kept templates are printed comma-separated, for `cobalt data generate
    --templates`. Exit status: 0 done, 2 bad input, 3 model or executor unreachable.
    """
    import asyncio

    from cobalt.orchestrator.datasets.generated.screening import (
        ScreeningRule,
        screen_templates,
        screening_problems,
    )
    from cobalt.orchestrator.rollouts.prompts import PromptTemplate
    from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams
    from cobalt.shared.clients import ModelEndpoint

    if low > high:
        raise _fail(EXIT_USAGE, f"--low {low} is above --high {high}")
    rule = ScreeningRule(low=low, high=high, instances=instances, n=n)
    with _handled():
        prompt = PromptTemplate.load(template)
        try:
            problems = screening_problems(
                family=family, difficulty=difficulty, seed=seed, rule=rule
            )
        except ValueError as exc:
            raise _fail(EXIT_USAGE, str(exc)) from exc
    params = SamplingParams(
        n=n,
        temperature=temperature,
        top_p=top_p,
        max_tokens=max_tokens,
        stop_at_code_end=stop_at_code_end,
    )
    endpoint = ModelEndpoint(base_url=base_url, model=model)

    async def screen(executor: Executor) -> list[Any]:
        sampler = ChatSampler(endpoint)
        try:
            return await screen_templates(
                problems=problems,
                sampler=sampler,
                params=params,
                prompt=prompt,
                executor=executor,
                rule=rule,
            )
        finally:
            await sampler.aclose()

    with open_executor() as executor, _handled():
        results = asyncio.run(screen(executor))
    kept = [entry.template for entry in results if entry.kept]
    record = {
        "rule": rule.describe(),
        "model": model,
        "family": family,
        "difficulty": difficulty,
        "seed": seed,
        "sampling": {
            "temperature": temperature,
            "top_p": top_p,
            "max_tokens": max_tokens,
            "template": template,
            "stop_at_code_end": stop_at_code_end,
        },
        "templates": [entry.as_json() for entry in results],
        "kept": kept,
    }
    if out is not None:
        with _handled():
            out.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    if as_json:
        _echo_json(record)
        return
    table = Table(title=f"screening ({rule.describe()})", title_justify="left")
    for column in ("template", "family", "samples", "p", "kept", "outcomes"):
        table.add_column(column, overflow="fold")
    for entry in results:
        outcomes = ", ".join(f"{k} {v}" for k, v in sorted(entry.outcomes.items()))
        table.add_row(
            entry.template,
            entry.family,
            str(entry.samples),
            f"{entry.pass_rate:.2f}",
            "yes" if entry.kept else "",
            outcomes,
        )
    Console(highlight=False).print(table)
    typer.echo(f"kept {len(kept)} of {len(results)}: {','.join(kept)}")
