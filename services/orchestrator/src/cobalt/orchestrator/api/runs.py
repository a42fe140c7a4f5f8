"""/v1/runs: rollout runs started, watched, cancelled, resumed and evaluated.

Each route validates, calls one service function and returns a contract; carrying a run
out is `worker.carry_out` with the app's carrier (queued, or a background thread).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status
from pydantic import Field

from cobalt.orchestrator.api.deps import CarrierDep, ExecutorSettings, RunId, Sessions
from cobalt.orchestrator.rollouts.prompts import check_bundled_name
from cobalt.orchestrator.runs import service
from cobalt.orchestrator.runs.evaluation import evaluate_run
from cobalt.orchestrator.worker.carry_out import carry_out_new_run, carry_out_run
from cobalt.shared.clients import ExecutorClient
from cobalt.shared.contracts.runs import (
    MAX_SAMPLES,
    EvaluationReport,
    RefineRunRequest,
    RunPublic,
    SampleRunRequest,
)
from cobalt.shared.errors import Unavailable

__all__ = ["router"]

router = APIRouter(tags=["runs"])

PassAtK = Annotated[
    list[Annotated[int, Field(ge=1, le=MAX_SAMPLES)]] | None,
    Query(max_length=16, description="the k of pass@k (default 1, 5 and 10)"),
]


def _key(request: SampleRunRequest | RefineRunRequest) -> str | None:
    return request.api_key.get_secret_value() if request.api_key else None


@router.post("/v1/runs", status_code=status.HTTP_202_ACCEPTED)
def create_sample_run(
    body: SampleRunRequest, sessions: Sessions, carrier: CarrierDep, executor: ExecutorSettings
) -> RunPublic:
    """Start a sample run (turn 0, and `turns` feedback turns if asked).

    Answers at once with the pending run: its trajectories (up to 168k rows for n=1024)
    are written just after, outside the request, so `trajectories_by_status` counts up
    to `total_trajectories` in the first moments.
    """
    check_bundled_name(body.template)
    run_id = service.create_sample_run(sessions, body, executor=executor, defer_trajectories=True)
    carry_out_new_run(carrier, sessions, run_id, api_key=_key(body))
    return service.run_public(sessions, run_id)


@router.post("/v1/runs/refine", status_code=status.HTTP_202_ACCEPTED)
def create_refine_run(
    body: RefineRunRequest, sessions: Sessions, carrier: CarrierDep, executor: ExecutorSettings
) -> RunPublic:
    """Start feedback turns on top of a finished sample run's turn 0."""
    run_id = service.create_refine_run(sessions, body, executor=executor)
    carry_out_run(carrier, sessions, run_id, api_key=_key(body), in_background=True)
    return service.run_public(sessions, run_id)


@router.get("/v1/runs")
def list_runs(
    sessions: Sessions, limit: Annotated[int, Query(ge=1, le=1000)] = 50
) -> list[RunPublic]:
    """The most recent runs, newest first."""
    return service.list_runs(sessions, limit=limit)


@router.get("/v1/runs/{run_id}")
def show_run(run_id: RunId, sessions: Sessions, turns: bool = False) -> RunPublic:
    """A run; `?turns=true` adds every trajectory with its turns."""
    return service.run_public(sessions, run_id, with_turns=turns)


@router.post("/v1/runs/{run_id}/cancel")
def cancel_run(run_id: RunId, sessions: Sessions) -> RunPublic:
    service.cancel_run(sessions, run_id)
    return service.run_public(sessions, run_id)


@router.post("/v1/runs/{run_id}/resume", status_code=status.HTTP_202_ACCEPTED)
def resume_run(run_id: RunId, sessions: Sessions, carrier: CarrierDep) -> RunPublic:
    """Re-queue the open and failed trajectories (API keys: set them on the workers)."""
    service.reopen_failed(sessions, run_id)
    carry_out_run(carrier, sessions, run_id, api_key=None, in_background=True)
    return service.run_public(sessions, run_id)


@router.post("/v1/runs/{run_id}/evaluate")
def evaluate(
    run_id: RunId,
    sessions: Sessions,
    executor_settings: ExecutorSettings,
    k: PassAtK = None,
) -> EvaluationReport:
    """Hidden tests for every turn not yet judged; Pass@1 per turn and pass@k."""
    if not executor_settings.url:
        raise Unavailable("evaluation needs an executor: set COBALT_EXECUTOR_URL on the API")
    with ExecutorClient.from_settings(executor_settings) as executor:
        return evaluate_run(sessions, run_id, executor, ks=tuple(k or (1, 5, 10)))
