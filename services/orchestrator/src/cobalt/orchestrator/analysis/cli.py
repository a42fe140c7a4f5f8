"""`cobalt analyze hacking|judge`: in-context reward hacking on perturbed datasets.

Exit statuses are those of `cobalt.orchestrator.console`; in particular 2 for a run that
cannot be analysed (dataset not perturbed, turns not evaluated) or a bad `--input` file,
and 3 when the database or the judge's endpoint cannot be reached. A judge command that
meets an endpoint failure still stores the verdicts it received before exiting 3.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.table import Table

from cobalt.orchestrator.analysis.judge import (
    CATEGORIES,
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_TOKENS,
    JudgeRun,
)
from cobalt.orchestrator.console import (
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    JsonOption,
    echo_json,
    fail,
    handled,
    store_context,
)
from cobalt.shared.errors import Overloaded, Unavailable, UpstreamError

# The cases (SQLAlchemy), the sampler (the OpenAI client) and the endpoint (httpx) are
# imported by the commands that use them, so that `cobalt analyze --help` loads none.
if TYPE_CHECKING:
    from cobalt.orchestrator.analysis.judge import CaseForJudge
    from cobalt.shared.clients import ModelEndpoint

__all__ = ["analyze_app"]

JUDGE_MAX_RETRIES = 2
"""Retries per judge request (the openai client's backoff) before it counts as failed."""
JUDGE_TIMEOUT_S = 300.0

analyze_app = typer.Typer(
    help="In-context reward hacking (docs/method.md): flag turns that fit a perturbed test, and "
    "have an LLM judge say how.",
    no_args_is_help=True,
)


@analyze_app.command("hacking")
def hacking(
    run: Annotated[int, typer.Option("--run", help="An evaluated run on a perturbed dataset.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the run's cases as JSON lines.")
    ] = None,
    any_failure: Annotated[
        bool,
        typer.Option(
            "--any-failure",
            help="Also flag turns after feedback that showed a crash or a limit on the "
            "perturbed test (its wrong expected output was never shown).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Flag each turn that changed its program and now passes the perturbed test whose
    wrong expected output its feedback showed, and every benign public test; store the
    cases (re-running adds none)."""
    from cobalt.orchestrator.analysis.cases import case_records, find_and_store_cases

    store = store_context()
    with handled(), store.sessions().begin() as session:
        summary = find_and_store_cases(session, run_id=run, any_failure=any_failure)
        records = case_records(session, run_id=run)
    store.close()
    if out is not None:
        with handled():
            out.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    if as_json:
        echo_json(
            {
                "run_id": run,
                "cases": summary.cases,
                "new_cases": summary.new_cases,
                "by_problem": summary.by_problem,
            }
        )
        return
    table = Table(title=f"hacking cases of run {run}")
    table.add_column("problem")
    table.add_column("cases", justify="right")
    table.add_column("new", justify="right")
    for problem, count in summary.by_problem.items():
        table.add_row(problem, str(count), str(summary.new_by_problem.get(problem, 0)))
    table.add_section()
    table.add_row("total", str(summary.cases), str(summary.new_cases))
    Console().print(table)


def _read_records(path: Path) -> list[dict[str, Any]]:
    with handled():
        lines = path.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise fail(EXIT_USAGE, f"{path}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise fail(EXIT_USAGE, f"{path}:{number}: not a case object")
        records.append(record)
    return records


def _ask_judge(
    endpoint: ModelEndpoint, cases: list[CaseForJudge], *, concurrency: int, max_tokens: int
) -> JudgeRun:
    from cobalt.orchestrator.analysis.judge import judge_cases
    from cobalt.orchestrator.rollouts.sampling import ChatSampler

    async def ask() -> JudgeRun:
        sampler = ChatSampler(endpoint, max_retries=JUDGE_MAX_RETRIES, timeout_s=JUDGE_TIMEOUT_S)
        try:
            return await judge_cases(sampler, cases, concurrency=concurrency, max_tokens=max_tokens)
        finally:
            await sampler.aclose()

    return asyncio.run(ask()) if cases else JudgeRun()


def _print_counts(counts: dict[str, dict[str, int]], title: str) -> None:
    table = Table(title=title)
    table.add_column("judge")
    table.add_column("category")
    table.add_column("cases", justify="right")
    for judge_model, per_category in counts.items():
        for category, count in per_category.items():
            label = f"{category}: {CATEGORIES[category]}" if category in CATEGORIES else category
            table.add_row(judge_model, label, str(count))
    Console().print(table)


@analyze_app.command("judge")
def judge(
    model: Annotated[str, typer.Option("--model", help="The judge model's name.")],
    base_url: Annotated[str, typer.Option("--base-url", help="OpenAI-compatible URL (.../v1).")],
    run: Annotated[int | None, typer.Option("--run", help="Judge this run's cases.")] = None,
    input_file: Annotated[
        Path | None,
        typer.Option("--input", help="Judge the cases of a JSON-lines file from --out."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="COBALT_MODEL_API_KEY",
            help="Key for the judge's endpoint (env COBALT_MODEL_API_KEY); never stored.",
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option(min=1, help="Judge requests in flight.")
    ] = DEFAULT_CONCURRENCY,
    max_tokens: Annotated[
        int, typer.Option(min=16, help="Tokens per judge answer.")
    ] = DEFAULT_MAX_TOKENS,
    as_json: JsonOption = False,
) -> None:
    """Sort the stored cases into docs/method.md's four categories; each (case, judge model) is
    asked once, and the counts cover every judge that has seen these cases."""
    from cobalt.orchestrator.analysis.cases import (
        CaseSelection,
        case_ids_of_records,
        cases_to_judge,
        store_verdicts,
        verdict_counts,
    )
    from cobalt.shared.clients import ModelEndpoint

    if (run is None) == (input_file is None):
        raise fail(EXIT_USAGE, "give exactly one of --run RUN and --input FILE.jsonl")
    records = _read_records(input_file) if input_file is not None else []
    store = store_context()
    sessions = store.sessions()
    with handled(), sessions() as session:
        selection = (
            CaseSelection(run_id=run)
            if run is not None
            else CaseSelection(case_ids=tuple(case_ids_of_records(session, records)))
        )
        pending = cases_to_judge(session, selection=selection, judge_model=model)
    endpoint = ModelEndpoint(
        base_url=base_url,
        model=model,
        api_key=SecretStr(api_key) if api_key else None,
        vllm_extensions=False,
    )
    with handled():
        asked = _ask_judge(endpoint, pending, concurrency=concurrency, max_tokens=max_tokens)
    with handled(), sessions.begin() as session:
        stored = store_verdicts(session, judge_model=model, verdicts=asked.verdicts)
    with handled(), sessions() as session:
        counts = verdict_counts(session, selection=selection)
    store.close()
    if asked.failures:
        first = asked.failures[0]
        unreachable = isinstance(first, Unavailable | UpstreamError | Overloaded)
        left = len(asked.failures) + asked.not_sent
        raise fail(
            EXIT_UNREACHABLE if unreachable else EXIT_USAGE,
            f"{first} ({stored} verdicts stored; {left} cases left unjudged: run the command "
            "again for them)",
        )
    if as_json:
        echo_json({"judge_model": model, "judged_now": stored, "counts": counts})
        return
    _print_counts(counts, f"judge verdicts ({stored} new from {model})")
