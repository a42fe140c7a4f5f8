"""Routes: each one validates, calls a service function and returns a contract."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from cobalt.orchestrator.api.deps import Sessions, Settings
from cobalt.orchestrator.api.executing import start_run
from cobalt.orchestrator.datasets import catalog
from cobalt.orchestrator.runs import service
from cobalt.orchestrator.runs.evaluation import evaluate_run
from cobalt.orchestrator.store import repo_runs
from cobalt.shared.clients import ExecutorClient, ExecutorClientSettings
from cobalt.shared.contracts import DatasetsPublic, ProblemPublic
from cobalt.shared.contracts.runs import (
    EvaluationReport,
    RefineRunRequest,
    RunPublic,
    SampleRunRequest,
)
from cobalt.shared.errors import Unavailable

router = APIRouter()


def _key(request: SampleRunRequest | RefineRunRequest) -> str | None:
    return request.api_key.get_secret_value() if request.api_key else None


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/v1/datasets")
def list_datasets(sessions: Sessions) -> DatasetsPublic:
    return catalog.list_datasets(sessions)


@router.get("/v1/datasets/{name}/problems/{external_id:path}")
def show_problem(name: str, external_id: str, sessions: Sessions) -> ProblemPublic:
    return catalog.problem_public(sessions, dataset=name, external_id=external_id)


@router.post("/v1/runs", status_code=status.HTTP_202_ACCEPTED)
def create_sample_run(body: SampleRunRequest, sessions: Sessions, settings: Settings) -> RunPublic:
    """Start a sample run (turn 0, and `turns` feedback turns if asked)."""
    run_id = service.create_sample_run(sessions, body)
    start_run(settings, sessions, run_id, api_key=_key(body))
    return service.run_public(sessions, run_id)


@router.post("/v1/runs/refine", status_code=status.HTTP_202_ACCEPTED)
def create_refine_run(body: RefineRunRequest, sessions: Sessions, settings: Settings) -> RunPublic:
    """Start feedback turns on top of a finished sample run's turn 0."""
    run_id = service.create_refine_run(sessions, body)
    start_run(settings, sessions, run_id, api_key=_key(body))
    return service.run_public(sessions, run_id)


@router.get("/v1/runs")
def list_runs(
    sessions: Sessions, limit: Annotated[int, Query(ge=1, le=1000)] = 50
) -> list[RunPublic]:
    with sessions() as session:
        ids = [run.id for run in repo_runs.list_runs(session, limit=limit)]
    return [service.run_public(sessions, run_id) for run_id in ids]


@router.get("/v1/runs/{run_id}")
def show_run(run_id: int, sessions: Sessions, turns: bool = False) -> RunPublic:
    """A run; `?turns=true` adds every trajectory with its turns."""
    return service.run_public(sessions, run_id, with_turns=turns)


@router.post("/v1/runs/{run_id}/cancel")
def cancel_run(run_id: int, sessions: Sessions) -> RunPublic:
    service.cancel_run(sessions, run_id)
    return service.run_public(sessions, run_id)


@router.post("/v1/runs/{run_id}/resume", status_code=status.HTTP_202_ACCEPTED)
def resume_run(run_id: int, sessions: Sessions, settings: Settings) -> RunPublic:
    """Re-queue the open and failed trajectories (API keys: set them on the workers)."""
    service.reopen_failed(sessions, run_id)
    start_run(settings, sessions, run_id, api_key=None)
    return service.run_public(sessions, run_id)


@router.post("/v1/runs/{run_id}/evaluate")
def evaluate(
    run_id: int, sessions: Sessions, k: Annotated[list[int] | None, Query()] = None
) -> EvaluationReport:
    """Hidden tests for every turn not yet judged; Pass@1 per turn and pass@k."""
    executor_settings = ExecutorClientSettings()
    if not executor_settings.url:
        raise Unavailable("evaluation needs an executor: set COBALT_EXECUTOR_URL on the API")
    with ExecutorClient.from_settings(executor_settings) as executor:
        return evaluate_run(sessions, run_id, executor, ks=tuple(k or (1, 5, 10)))
