"""Read-only routes for the web UI (and scripts): a run's rates, problems and trajectories,
stored problems, bandit datasets, hacking cases and search. Each calls one service function."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from cobalt.orchestrator.analysis.browse import hacking_cases
from cobalt.orchestrator.api.deps import DatasetName, ExternalId, RunId, Sessions, TurnId
from cobalt.orchestrator.api.runs import PassAtK
from cobalt.orchestrator.bandit import browse as bandit_browse
from cobalt.orchestrator.datasets import catalog
from cobalt.orchestrator.datasets.search import search as search_text
from cobalt.orchestrator.runs import browse as run_browse
from cobalt.orchestrator.runs.comparison import compare_runs
from cobalt.orchestrator.runs.turn_search import TestSet, TurnFilters, find_turns, turn_tests
from cobalt.shared.contracts.bounds import INT32_MAX
from cobalt.shared.contracts.browse import (
    BanditContextsPage,
    BanditDatasetsPublic,
    HackingCasesPublic,
    ProblemsPage,
    RunComparison,
    RunProblemDetail,
    RunProblemsPublic,
    SearchKind,
    SearchResults,
    TurnMatchesPage,
    TurnTests,
)
from cobalt.shared.contracts.runs import EvaluationReport

router = APIRouter(prefix="/v1", tags=["browse"])

Offset = Annotated[int, Query(ge=0, le=INT32_MAX)]


@router.get("/runs/{run_id}/report")
def run_report(
    run_id: RunId, sessions: Sessions, k: PassAtK = None, intervals: bool = True
) -> EvaluationReport:
    """Pass@1 per turn and pass@k from the hidden results stored so far (runs nothing);
    `intervals=false` skips the 95% intervals' bootstrap (a list of many runs)."""
    return run_browse.run_report(sessions, run_id, ks=tuple(k or (1, 5, 10)), intervals=intervals)


@router.get("/runs/{run_id}/problems")
def run_problems(run_id: RunId, sessions: Sessions) -> RunProblemsPublic:
    """Every problem of the run with its pass rates, reward and outcome."""
    return run_browse.run_problems(sessions, run_id)


@router.get("/runs/{run_id}/problems/{external_id:path}")
def run_problem(run_id: RunId, external_id: ExternalId, sessions: Sessions) -> RunProblemDetail:
    """One problem's trajectories: every turn, its diff, verdicts and reward."""
    return run_browse.run_problem_detail(sessions, run_id, external_id)


@router.get("/runs/{run_id}/compare/{other_run_id}")
def run_comparison(run_id: RunId, other_run_id: RunId, sessions: Sessions) -> RunComparison:
    """Run `other_run_id` against run `run_id` (the baseline): per problem and per turn,
    fixed, broken or unchanged, with both runs' Pass@1 per turn (same dataset only)."""
    return compare_runs(sessions, run_id, other_run_id)


@router.get("/runs/{run_id}/turns")
def run_turns(
    run_id: RunId,
    sessions: Sessions,
    verdict: Annotated[str | None, Query(max_length=50)] = None,
    tests: TestSet = TestSet.ANY,
    turn: Annotated[int | None, Query(ge=0, le=INT32_MAX)] = None,
    problem: Annotated[str | None, Query(max_length=300)] = None,
    text: Annotated[str | None, Query(max_length=500)] = None,
    hidden_passed: bool | None = None,
    component: Annotated[str | None, Query(max_length=50)] = None,
    min: float | None = None,  # noqa: A002 (the query parameter's name)
    max: float | None = None,  # noqa: A002
    offset: Offset = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> TurnMatchesPage:
    """The run's turns matching every filter given: a verdict on any/public/hidden test,
    the turn index, a problem id substring, a response substring, hidden pass, and a reward
    component range."""
    filters = TurnFilters(
        verdict=verdict,
        tests=tests,
        turn=turn,
        problem=problem,
        text=text,
        hidden_passed=hidden_passed,
        component=component,
        minimum=min,
        maximum=max,
    )
    return find_turns(sessions, run_id, filters, offset=offset, limit=limit)


@router.get("/runs/{run_id}/turns/{turn_id}/tests")
def run_turn_tests(run_id: RunId, turn_id: TurnId, sessions: Sessions) -> TurnTests:
    """Every test of a turn: input, expected output, the program's output and error."""
    return turn_tests(sessions, run_id, turn_id)


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
