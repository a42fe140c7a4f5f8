"""Several runs side by side: Pass@1 at turn 0 and at the last turn with 95% intervals,
and per difficulty where the dataset has difficulties (LiveCodeBench's easy/medium/hard,
TACO's levels). Read from stored hidden results; a run not evaluated yet has nulls and
the command that evaluates it."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.analysis.statistics import bootstrap_pass_at_1
from cobalt.orchestrator.runs.comparison import problem_counts
from cobalt.orchestrator.runs.service import run_public
from cobalt.orchestrator.store import repo_datasets, repo_runs
from cobalt.shared.contracts.results import DifficultyCell, RunTable, RunTableRow
from cobalt.shared.errors import InvalidInput

__all__ = ["MAX_RUNS", "difficulty_order", "run_table"]

MAX_RUNS = 50
"""Runs in one table: a page and a terminal stay readable."""

_KNOWN_ORDER = (
    "introductory",
    "easy",
    "interview",
    "medium",
    "medium_hard",
    "hard",
    "competition",
    "very_hard",
    "unknown_difficulty",
)


def difficulty_order(names: set[str]) -> list[str]:
    """Easiest first where the name is a known level, then the others alphabetically."""

    def key(name: str) -> tuple[int, str]:
        lowered = name.lower()
        rank = _KNOWN_ORDER.index(lowered) if lowered in _KNOWN_ORDER else len(_KNOWN_ORDER)
        return rank, lowered

    return sorted(names, key=key)


def _pass_at_1(counts: Sequence[tuple[int, int]]) -> float | None:
    return sum(c / n for c, n in counts) / len(counts) if counts else None


def run_table(sessions: sessionmaker[Session], run_ids: Sequence[int]) -> RunTable:
    """One row per run, in the order given.

    Raises:
        NotFound: a run does not exist.
        InvalidInput: no run, too many, or one given twice.
    """
    if not run_ids:
        raise InvalidInput("name at least one run")
    if len(run_ids) > MAX_RUNS:
        raise InvalidInput(f"at most {MAX_RUNS} runs in one table, not {len(run_ids)}")
    if len(set(run_ids)) != len(run_ids):
        raise InvalidInput("a run is named twice")
    rows: list[RunTableRow] = []
    difficulties: set[str] = set()
    datasets: list[str] = []
    for run_id in run_ids:
        with sessions() as session:
            run = repo_runs.get_run(session, run_id=run_id)
            counts, turns = problem_counts(session, run)
            n = run.params.n
            levels = {
                problem_id: problem.difficulty
                for problem_id, problem in repo_datasets.problems_by_id(session, ids=counts).items()
            }
        public = run_public(sessions, run_id)
        if public.dataset not in datasets:
            datasets.append(public.dataset)
        first = [per_turn[0] for per_turn in counts.values()]
        last = [per_turn[-1] for per_turn in counts.values()]
        by_level: dict[str, list[tuple[int, int]]] = {}
        for problem_id, per_turn in counts.items():
            if levels.get(problem_id):
                by_level.setdefault(str(levels[problem_id]), []).append(per_turn[-1])
        difficulties |= by_level.keys()
        rows.append(
            RunTableRow(
                run=public,
                problems=len(counts),
                samples=n,
                turns=turns,
                pass_at_1_first=_pass_at_1(first),
                pass_at_1_first_interval=bootstrap_pass_at_1(first),
                pass_at_1_last=_pass_at_1(last),
                pass_at_1_last_interval=bootstrap_pass_at_1(last),
                by_difficulty={
                    level: DifficultyCell(
                        problems=len(cells),
                        pass_at_1=_pass_at_1(cells),
                        interval=bootstrap_pass_at_1(cells),
                    )
                    for level, cells in by_level.items()
                },
                unevaluated=None if counts else f"cobalt run evaluate {run_id}",
            )
        )
    return RunTable(rows=rows, difficulties=difficulty_order(difficulties), datasets=datasets)
