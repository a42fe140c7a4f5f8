"""/v1/datasets: the imported datasets and their problems."""

from __future__ import annotations

from fastapi import APIRouter

from cobalt.orchestrator.api.deps import DatasetName, ExternalId, Sessions
from cobalt.orchestrator.datasets import catalog
from cobalt.shared.contracts import DatasetsPublic, ProblemPublic

__all__ = ["router"]

router = APIRouter(tags=["datasets"])


@router.get("/v1/datasets")
def list_datasets(sessions: Sessions) -> DatasetsPublic:
    return catalog.list_datasets(sessions)


@router.get("/v1/datasets/{name}/problems/{external_id:path}")
def show_problem(name: DatasetName, external_id: ExternalId, sessions: Sessions) -> ProblemPublic:
    return catalog.problem_public(sessions, dataset=name, external_id=external_id)
