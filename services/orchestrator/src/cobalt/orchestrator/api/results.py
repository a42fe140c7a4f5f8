"""Results to take away: exports (CSV or JSON) of a run's problems, a comparison, a
training job's metrics and a multi-run table; the multi-run table itself; run labels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel

from cobalt.orchestrator.api.deps import JobId, RunId, Sessions, Settings
from cobalt.orchestrator.results import exports
from cobalt.orchestrator.results.exports import ExportFormat
from cobalt.orchestrator.results.labels import label_run
from cobalt.orchestrator.results.table import MAX_RUNS, run_table
from cobalt.orchestrator.runs import browse as run_browse
from cobalt.orchestrator.runs import service as run_service
from cobalt.orchestrator.runs.comparison import compare_runs
from cobalt.orchestrator.training import service as training_service
from cobalt.shared.contracts.bounds import INT32_MAX
from cobalt.shared.contracts.results import RunLabels, RunTable
from cobalt.shared.contracts.runs import RunPublic

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["results"])

Format = Annotated[ExportFormat, Query(description="csv (one flat row per item) or json")]
RunIds = Annotated[
    list[Annotated[int, Query(ge=1, le=INT32_MAX)]],
    Query(min_length=1, max_length=MAX_RUNS, description="the runs, in the table's order"),
]


def _export(
    body: BaseModel, rows: Callable[[Any], list[dict[str, Any]]], form: ExportFormat, name: str
) -> Response:
    content, media = exports.export_text(body, rows, form), exports.MEDIA_TYPES[form]
    disposition = f'attachment; filename="{name}.{form.value}"'
    return Response(content, media_type=media, headers={"Content-Disposition": disposition})


@router.patch("/runs/{run_id}")
def label(run_id: RunId, body: RunLabels, sessions: Sessions) -> RunPublic:
    """Set a run's name, tags or notes (fields left out are kept)."""
    label_run(sessions, run_id, body)
    return run_service.run_public(sessions, run_id)


@router.get("/tables/runs")
def runs_table(sessions: Sessions, run: RunIds) -> RunTable:
    """Several runs side by side (`?run=1&run=2...`): Pass@1 at turn 0 and the last turn
    with 95% intervals, per difficulty where the dataset has difficulties."""
    return run_table(sessions, run)


@router.get("/exports/tables/runs", response_class=Response)
def export_runs_table(
    sessions: Sessions, run: RunIds, format: Format = ExportFormat.CSV
) -> Response:  # noqa: A002
    """The multi-run table as a file."""
    return _export(run_table(sessions, run), exports.table_rows, format, "runs-table")


@router.get("/exports/runs/{run_id}/problems", response_class=Response)
def export_run_problems(
    run_id: RunId,
    sessions: Sessions,
    format: Format = ExportFormat.CSV,  # noqa: A002
) -> Response:
    """A run's per-problem results as a file."""
    problems = run_browse.run_problems(sessions, run_id)
    return _export(problems, exports.problem_rows, format, f"run-{run_id}-problems")


@router.get("/exports/runs/{run_id}/compare/{other_run_id}", response_class=Response)
def export_comparison(
    run_id: RunId,
    other_run_id: RunId,
    sessions: Sessions,
    format: Format = ExportFormat.CSV,  # noqa: A002
) -> Response:
    """A comparison as a file: per problem and turn, then per turn."""
    comparison = compare_runs(sessions, run_id, other_run_id)
    return _export(comparison, exports.comparison_rows, format, f"compare-{run_id}-{other_run_id}")


@router.get("/exports/training/jobs/{job_id}/metrics", response_class=Response)
def export_job_metrics(
    job_id: JobId,
    sessions: Sessions,
    settings: Settings,
    format: Format = ExportFormat.CSV,  # noqa: A002
) -> Response:
    """A training job's step metrics as a file (one row per step)."""
    job = training_service.job_public(sessions, job_id, stale_after_s=settings.training_stale_s)
    return _export(job, exports.job_metric_rows, format, f"training-job-{job_id}-metrics")
