"""Two runs over the same dataset side by side: which problems the second fixed or broke.

What a researcher asks after training: of the problems the policy failed before, which
does it pass now, and which did it stop passing? Per problem and per turn, each run's
Pass@1 (the fraction of its samples whose program passes every hidden test, by
evaluation's rules) and the change from run A to run B. Only stored hidden results are
read; nothing runs.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.runs.evaluation import per_turn_rates, stored_report
from cobalt.orchestrator.runs.service import run_public
from cobalt.orchestrator.store import repo_runs
from cobalt.orchestrator.store.models import Problem, Run, Turn
from cobalt.shared.contracts.browse import (
    ComparedProblem,
    ComparedTurn,
    RunComparison,
    TurnChange,
)
from cobalt.shared.errors import InvalidInput

__all__ = ["change_of", "compare_runs", "problem_rates"]


def change_of(pass_a: float | None, pass_b: float | None) -> TurnChange:
    if pass_a is None or pass_b is None:
        return TurnChange.UNEVALUATED
    if pass_b > pass_a:
        return TurnChange.FIXED
    return TurnChange.BROKEN if pass_b < pass_a else TurnChange.UNCHANGED


def problem_rates(session: Session, run: Run) -> tuple[dict[int, list[float]], int]:
    """Pass@1 per turn of each problem with hidden results in `run`, and the run's turns."""
    n = int(run.params.get("n", 1))
    turns = int(run.params.get("turns", 0)) + 1
    outcomes: dict[int, list[list[bool | None]]] = {}
    evaluable = set(
        session.scalars(
            select(Turn.problem_id)
            .where(Turn.run_id == run.id, Turn.hidden_passed.is_not(None))
            .distinct()
        )
    )
    for problem_id, sample, hidden in session.execute(
        select(Turn.problem_id, Turn.sample_index, Turn.hidden_passed)
        .where(Turn.run_id == run.id)
        .order_by(Turn.problem_id, Turn.sample_index, Turn.turn_index)
    ):
        if problem_id in evaluable and sample < n:
            outcomes.setdefault(problem_id, [[] for _ in range(n)])[sample].append(hidden)
    rates = {pid: per_turn_rates({pid: samples}, turns, n) for pid, samples in outcomes.items()}
    return rates, turns


def compare_runs(sessions: sessionmaker[Session], run_a: int, run_b: int) -> RunComparison:
    """Run B against run A (the baseline), problem by problem and turn by turn.

    Raises:
        NotFound: either run does not exist.
        InvalidInput: the runs are over different datasets, or are the same run.
    """
    if run_a == run_b:
        raise InvalidInput(f"compare run {run_a} with another run, not with itself")
    with sessions() as session:
        a = repo_runs.get_run(session, run_id=run_a)
        b = repo_runs.get_run(session, run_id=run_b)
        if a.dataset_id != b.dataset_id:
            raise InvalidInput(
                f"runs {run_a} and {run_b} are over different datasets; a comparison needs "
                "the same problems"
            )
        rates_a, turns_a = problem_rates(session, a)
        rates_b, turns_b = problem_rates(session, b)
        problems = {
            p.id: p
            for p in session.scalars(
                select(Problem).where(Problem.id.in_(rates_a.keys() | rates_b.keys()))
            )
        }
    turns = max(turns_a, turns_b)
    counts = [dict.fromkeys((c.value for c in TurnChange), 0) for _ in range(turns)]
    compared = []
    for problem_id in sorted(problems, key=lambda pid: problems[pid].external_id):
        row_a, row_b = rates_a.get(problem_id), rates_b.get(problem_id)
        cells = []
        for turn in range(turns):
            pass_a = row_a[turn] if row_a is not None and turn < turns_a else None
            pass_b = row_b[turn] if row_b is not None and turn < turns_b else None
            change = change_of(pass_a, pass_b)
            counts[turn][change.value] += 1
            cells.append(ComparedTurn(turn_index=turn, pass_a=pass_a, pass_b=pass_b, change=change))
        last = min(turns_a, turns_b) - 1
        compared.append(
            ComparedProblem(
                external_id=problems[problem_id].external_id,
                difficulty=problems[problem_id].difficulty,
                turns=cells,
                change=cells[last].change,
            )
        )
    return RunComparison(
        run_a=run_public(sessions, run_a),
        run_b=run_public(sessions, run_b),
        report_a=stored_report(sessions, run_a, ks=()),
        report_b=stored_report(sessions, run_b, ks=()),
        turns=turns,
        counts=counts,
        problems=compared,
    )
