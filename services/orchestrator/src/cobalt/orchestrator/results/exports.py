"""CSV and JSON exports of what the pages show: a run's per-problem results, a comparison
of two runs, a training job's step metrics, a multi-run table.

JSON is the API's own contract (the same fields, nothing lost). CSV is one flat row per
item with a header; an interval becomes two columns (`..._low`, `..._high`), a value not
measured an empty cell (never 0), so a spreadsheet reads it as missing.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable, Mapping
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel

from cobalt.shared.contracts.browse import RunComparison, RunProblemsPublic
from cobalt.shared.contracts.results import RunTable
from cobalt.shared.contracts.training import TrainingJobPublic

__all__ = [
    "ExportFormat",
    "MEDIA_TYPES",
    "export_text",
    "comparison_rows",
    "job_metric_rows",
    "problem_rows",
    "table_rows",
    "to_csv",
]


class ExportFormat(StrEnum):
    CSV = "csv"
    JSON = "json"


Row = dict[str, Any]
_Body = TypeVar("_Body", bound=BaseModel)

MEDIA_TYPES = {ExportFormat.CSV: "text/csv; charset=utf-8", ExportFormat.JSON: "application/json"}
"""What an export is served as (`GET /v1/exports/...`)."""


def export_text(
    body: _Body,
    rows: Callable[[_Body], list[Row]],
    form: ExportFormat,
    *,
    indent: int | None = None,
) -> str:
    """The one way a result is exported, by the REST routes and the CLI alike: `body` as
    JSON (its contract), or `rows(body)` (one flat row per item) as CSV."""
    if form == ExportFormat.JSON:
        return body.model_dump_json(indent=indent)
    return to_csv(rows(body))


def _interval(prefix: str, interval: tuple[float, float] | None) -> Row:
    low, high = interval if interval is not None else (None, None)
    return {f"{prefix}_low": low, f"{prefix}_high": high}


def to_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """Rows as CSV: the columns are every key, in first-seen order; None is empty."""
    materialised = list(rows)
    columns: dict[str, None] = {}
    for row in materialised:
        columns.update(dict.fromkeys(row))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    for row in materialised:
        writer.writerow({k: "" if v is None else v for k, v in row.items()})
    return out.getvalue()


def problem_rows(problems: RunProblemsPublic) -> list[Row]:
    return [
        {
            "run_id": problems.run_id,
            "problem": p.external_id,
            "difficulty": p.difficulty,
            "outcome": p.outcome.value,
            "samples": p.samples,
            "turns": p.turns,
            "hidden_pass_first": p.hidden_pass_first,
            **_interval("hidden_pass_first", p.hidden_pass_first_interval),
            "hidden_pass_last": p.hidden_pass_last,
            **_interval("hidden_pass_last", p.hidden_pass_last_interval),
            "public_pass_last": p.public_pass_last,
            "mean_reward": p.mean_reward,
            "flagged": p.flagged,
            "failed": p.failed,
        }
        for p in problems.items
    ]


def comparison_rows(comparison: RunComparison) -> list[Row]:
    """One row per problem and turn, then one summary row per turn (problem empty)."""
    rows: list[Row] = []
    for problem in comparison.problems:
        for turn in problem.turns:
            rows.append(
                {
                    "run_a": comparison.run_a.id,
                    "run_b": comparison.run_b.id,
                    "problem": problem.external_id,
                    "difficulty": problem.difficulty,
                    "turn": turn.turn_index,
                    "pass_a": turn.pass_a,
                    "pass_b": turn.pass_b,
                    "difference": None
                    if turn.pass_a is None or turn.pass_b is None
                    else turn.pass_b - turn.pass_a,
                    **_interval("difference", turn.difference_interval),
                    "change": turn.change.value,
                }
            )
    for index in range(comparison.turns):
        rates_a, rates_b = comparison.report_a.pass_at_1, comparison.report_b.pass_at_1
        rows.append(
            {
                "run_a": comparison.run_a.id,
                "run_b": comparison.run_b.id,
                "problem": None,
                "difficulty": None,
                "turn": index,
                "pass_a": rates_a[index] if rates_a and index < len(rates_a) else None,
                "pass_b": rates_b[index] if rates_b and index < len(rates_b) else None,
                "difference": comparison.difference[index] if comparison.difference else None,
                **_interval(
                    "difference",
                    comparison.difference_interval[index]
                    if comparison.difference_interval
                    else None,
                ),
                "change": None,
            }
        )
    return rows


def job_metric_rows(job: TrainingJobPublic) -> list[Row]:
    """One row per reported step: step, policy version, time, then every metric."""
    return [
        {
            "job_id": job.id,
            "step": step.step,
            "policy_version": step.policy_version,
            "created_at": step.created_at.isoformat() if step.created_at else None,
            **dict(sorted(step.metrics.items())),
        }
        for step in job.steps
    ]


def table_rows(table: RunTable) -> list[Row]:
    rows = []
    for row in table.rows:
        levels: Row = {}
        for level in table.difficulties:
            cell = row.by_difficulty.get(level)
            levels[f"{level}_problems"] = cell.problems if cell else 0
            levels[f"{level}_pass_at_1"] = cell.pass_at_1 if cell else None
            levels |= _interval(f"{level}_pass_at_1", cell.interval if cell else None)
        rows.append(
            {
                "run_id": row.run.id,
                "name": row.run.name,
                "tags": " ".join(row.run.tags),
                "kind": row.run.kind.value,
                "dataset": row.run.dataset,
                "model": row.run.model,
                "policy_versions": " ".join(str(v) for v in row.run.policy_versions),
                "problems": row.problems,
                "samples": row.samples,
                "turns": row.turns,
                "pass_at_1_first": row.pass_at_1_first,
                **_interval("pass_at_1_first", row.pass_at_1_first_interval),
                "pass_at_1_last": row.pass_at_1_last,
                **_interval("pass_at_1_last", row.pass_at_1_last_interval),
                **levels,
            }
        )
    return rows
