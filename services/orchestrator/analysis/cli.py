"""`cobalt analyze hacking|judge`: in-context reward hacking on perturbed datasets."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from pydantic import SecretStr
from rich.console import Console
from rich.table import Table
from sqlalchemy import select

from cobalt.orchestrator.analysis.cases import case_record, find_and_store_cases
from cobalt.orchestrator.analysis.judge import (
    CATEGORIES,
    JudgedCase,
    judge_cases,
    judge_messages,
)
from cobalt.orchestrator.console import (
    EXIT_USAGE,
    StoreContext,
    echo_json,
    fail,
    handled,
    settings_or_exit,
)
from cobalt.orchestrator.rollouts.sampling import ChatSampler
from cobalt.orchestrator.store.models import HackingCase, JudgeVerdict, Problem
from cobalt.shared.clients import ModelEndpoint

__all__ = ["analyze_app"]

analyze_app = typer.Typer(
    help="In-context reward hacking (METHOD.md): flag turns that fit a perturbed test, and "
    "have an LLM judge say how.",
    no_args_is_help=True,
)
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


@analyze_app.command("hacking")
def hacking(
    run: Annotated[int, typer.Option("--run", help="An evaluated run on a perturbed dataset.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the cases as JSON lines.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Flag each turn that changed its program and now passes the perturbed test its
    feedback showed and every benign public test; store the cases (re-running adds none)."""
    store = StoreContext(settings=settings_or_exit())
    with handled(), store.sessions().begin() as session:
        summary = find_and_store_cases(session, run_id=run)
        session.flush()
        records = [
            case_record(case, problem)
            for case, problem in session.execute(
                select(HackingCase, Problem)
                .join(Problem, Problem.id == HackingCase.problem_id)
                .where(HackingCase.run_id == run)
                .order_by(HackingCase.id)
            )
        ]
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
    table = Table(title=f"run {run}: {summary.cases} flagged turns ({summary.new_cases} new)")
    table.add_column("problem")
    table.add_column("cases", justify="right")
    for problem, count in summary.by_problem.items():
        table.add_row(problem, str(count))
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
        str | None, typer.Option("--api-key", envvar="COBALT_MODEL_API_KEY", help="Bearer key.")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Requests in flight.")] = 8,
    as_json: JsonOption = False,
) -> None:
    """Sort the stored cases into the four categories; each (case, judge) is asked once."""
    if (run is None) == (input_file is None):
        raise fail(EXIT_USAGE, "give exactly one of --run RUN and --input FILE.jsonl")
    wanted: set[int] | None = None
    if input_file is not None:
        with handled():
            lines = input_file.read_text(encoding="utf-8").splitlines()
        try:
            wanted = {int(json.loads(line)["case_id"]) for line in lines if line.strip()}
        except (ValueError, KeyError, TypeError) as exc:
            raise fail(
                EXIT_USAGE, f"{input_file}: not the JSON lines of `cobalt analyze hacking --out`"
            ) from exc
    store = StoreContext(settings=settings_or_exit())
    sessions = store.sessions()
    with handled(), sessions() as session:
        query = select(HackingCase, Problem).join(Problem, Problem.id == HackingCase.problem_id)
        query = (
            query.where(HackingCase.run_id == run)
            if run is not None
            else query.where(HackingCase.id.in_(wanted or set()))
        )
        judged = set(
            session.scalars(select(JudgeVerdict.case_id).where(JudgeVerdict.judge_model == model))
        )
        pending = [
            (
                case.id,
                judge_messages(
                    problem.statement, case.feedback, case.previous_code, case.new_code, case.diff
                ),
            )
            for case, problem in session.execute(query.order_by(HackingCase.id))
            if case.id not in judged
        ]
    endpoint = ModelEndpoint(
        base_url=base_url,
        model=model,
        api_key=SecretStr(api_key) if api_key else None,
        vllm_extensions=False,
    )

    async def ask() -> list[JudgedCase]:
        sampler = ChatSampler(endpoint, max_retries=2, timeout_s=300)
        try:
            return await judge_cases(sampler, pending, concurrency=concurrency)
        finally:
            await sampler.aclose()

    with handled():
        verdicts = asyncio.run(ask()) if pending else []
    with handled(), sessions.begin() as session:
        session.add_all(
            JudgeVerdict(
                case_id=v.case_id, judge_model=model, category=v.category, raw_answer=v.raw_answer
            )
            for v in verdicts
        )
    with handled(), sessions() as session:
        case_filter = (
            HackingCase.run_id == run if run is not None else HackingCase.id.in_(wanted or set())
        )
        rows = session.execute(
            select(JudgeVerdict.judge_model, JudgeVerdict.category)
            .join(HackingCase, HackingCase.id == JudgeVerdict.case_id)
            .where(case_filter)
        ).all()
    store.close()
    counts: dict[str, Counter[str]] = {}
    for judge_model, category in rows:
        counts.setdefault(judge_model, Counter())[category] += 1
    if as_json:
        echo_json(
            {
                "judged_now": len(verdicts),
                "counts": {m: dict(sorted(c.items())) for m, c in sorted(counts.items())},
            }
        )
        return
    table = Table(title=f"judge verdicts ({len(verdicts)} new)")
    table.add_column("judge")
    table.add_column("category")
    table.add_column("cases", justify="right")
    for judge_model, counter in sorted(counts.items()):
        for category, count in sorted(counter.items()):
            label = f"{category}: {CATEGORIES[category]}" if category in CATEGORIES else category
            table.add_row(judge_model, label, str(count))
    Console().print(table)
