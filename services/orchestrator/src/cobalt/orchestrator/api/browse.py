"""Read-only routes for the web UI (and scripts): a run's rates, problems and trajectories,
stored problems, bandit datasets, hacking cases and search. Each calls one service function."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from cobalt.orchestrator.analysis.browse import hacking_cases
from cobalt.orchestrator.api.deps import DatasetName, ExternalId, RunId, Sessions
from cobalt.orchestrator.api.runs import PassAtK
from cobalt.orchestrator.bandit import browse as bandit_browse
from cobalt.orchestrator.datasets import catalog
from cobalt.orchestrator.datasets.search import search as search_text
from cobalt.orchestrator.runs import browse as run_browse
from cobalt.shared.contracts.bounds import INT32_MAX
from cobalt.shared.contracts.browse import (
    BanditContextsPage,
    BanditDatasetsPublic,
    HackingCasesPublic,
    ProblemsPage,
    RunProblemDetail,
    RunProblemsPublic,
    SearchKind,
    SearchResults,
)
from cobalt.shared.contracts.runs import EvaluationReport

router = APIRouter(prefix="/v1", tags=["browse"])

Offset = Annotated[int, Query(ge=0, le=INT32_MAX)]


@router.get("/runs/{run_id}/report")
def run_report(run_id: RunId, sessions: Sessions, k: PassAtK = None) -> EvaluationReport:
    """Pass@1 per turn and pass@k from the hidden results stored so far (runs nothing)."""
    return run_browse.run_report(sessions, run_id, ks=tuple(k or (1, 5, 10)))


@router.get("/runs/{run_id}/problems")
def run_problems(run_id: RunId, sessions: Sessions) -> RunProblemsPublic:
    """Every problem of the run with its pass rates, reward and outcome."""
    return run_browse.run_problems(sessions, run_id)


@router.get("/runs/{run_id}/problems/{external_id:path}")
def run_problem(run_id: RunId, external_id: ExternalId, sessions: Sessions) -> RunProblemDetail:
    """One problem's trajectories: every turn, its diff, verdicts and reward."""
    return run_browse.run_problem_detail(sessions, run_id, external_id)


@router.get("/runs/{run_id}/hacking-cases")
def run_hacking_cases(
    run_id: RunId, sessions: Sessions, category: Annotated[str | None, Query(max_length=50)] = None
) -> HackingCasesPublic:
    """Flagged turns with their diffs and the judges' categories, and counts per category."""
    return hacking_cases(sessions, run_id=run_id, category=category)


@router.get("/datasets/{name}/problems")
def dataset_problems(
    name: DatasetName,
    sessions: Sessions,
    offset: Offset = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    difficulty: Annotated[str | None, Query(max_length=50)] = None,
) -> ProblemsPage:
    """A page of a dataset's problems."""
    return catalog.problems_page(
        sessions, dataset=name, offset=offset, limit=limit, difficulty=difficulty
    )


@router.get("/bandit/datasets")
def bandit_datasets(sessions: Sessions) -> BanditDatasetsPublic:
    """Every bandit dataset with the builder's per-rule kept and dropped counts."""
    return bandit_browse.list_bandit_datasets(sessions)


@router.get("/bandit/datasets/{name}/contexts")
def bandit_contexts(
    name: DatasetName,
    sessions: Sessions,
    offset: Offset = 0,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> BanditContextsPage:
    """A page of a bandit dataset's contexts, in training order."""
    return bandit_browse.contexts_page(sessions, name=name, offset=offset, limit=limit)


@router.get("/search")
def search(
    sessions: Sessions,
    q: Annotated[str, Query(min_length=1, max_length=500)],
    kind: Annotated[list[SearchKind] | None, Query()] = None,
    run_id: Annotated[int | None, Query(ge=1, le=INT32_MAX)] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> SearchResults:
    """Full-text search over problem statements and responses (PostgreSQL; SQLite: LIKE)."""
    kinds = tuple(kind) if kind else (SearchKind.PROBLEMS, SearchKind.RESPONSES)
    return search_text(sessions, query=q, kinds=kinds, run_id=run_id, limit=limit)
