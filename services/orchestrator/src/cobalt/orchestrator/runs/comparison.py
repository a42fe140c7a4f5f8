"""Two runs over the same dataset side by side: which problems the second fixed or broke.

What a researcher asks after training: of the problems the policy failed before, which
does it pass now, and which did it stop passing? Per problem and per turn, each run's
Pass@1 (the fraction of its samples whose program passes every hidden test, by
evaluation's rules) and the change from run A to run B. Only stored hidden results are
read; nothing runs.

A problem is "fixed" or "broken" only when the change is larger than the noise of its few
samples (the 95% Newcombe interval of the difference excludes 0); a smaller move is
"within_noise". The Pass@1 difference per turn carries a paired bootstrap interval and
its verdict, which needs at least `MIN_PROBLEMS_FOR_A_VERDICT` shared problems
(analysis.statistics).
"""

from __future__ import annotations

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.analysis.statistics import (
    bootstrap_difference,
    difference_verdict,
    newcombe_difference,
)
from cobalt.orchestrator.runs.evaluation import per_turn_counts, stored_report
from cobalt.orchestrator.runs.service import run_public
from cobalt.orchestrator.store import repo_datasets, repo_runs, repo_turns
from cobalt.orchestrator.store.models import Run
from cobalt.shared.contracts.browse import (
    ComparedProblem,
    ComparedTurn,
    RunComparison,
    TurnChange,
)
from cobalt.shared.errors import InvalidInput

__all__ = ["change_of", "compare_runs", "counts_by_external_id", "problem_counts"]

Counted = tuple[int, int]
"""(samples passing, samples) of one problem at one turn."""


def change_of(a: Counted | None, b: Counted | None) -> TurnChange:
    """How one problem moved from A's (passes, samples) to B's, against its noise."""
    if a is None or b is None:
        return TurnChange.UNEVALUATED
    if a[0] * b[1] == b[0] * a[1]:
        return TurnChange.UNCHANGED
    low, high = newcombe_difference(*a, *b) or (-1.0, 1.0)
    if low > 0:
        return TurnChange.FIXED
    return TurnChange.BROKEN if high < 0 else TurnChange.WITHIN_NOISE


def problem_counts(session: Session, run: Run) -> tuple[dict[int, list[Counted]], int]:
    """Per problem with hidden results in `run`, per turn (passing samples, samples); and
    the run's turns."""
    params = run.params
    n, turns = params.n, params.feedback_turns + 1
    outcomes: dict[int, list[list[bool | None]]] = {}
    rows = repo_turns.turn_outcomes(session, run_id=run.id)
    evaluable = {problem_id for problem_id, *_, hidden in rows if hidden is not None}
    for problem_id, sample, _, _, hidden in rows:
        if problem_id in evaluable and sample < n:
            outcomes.setdefault(problem_id, [[] for _ in range(n)])[sample].append(hidden)
    by_turn = per_turn_counts(outcomes, turns)
    return {pid: [(counts[pid], n) for counts in by_turn] for pid in outcomes}, turns


def counts_by_external_id(sessions: sessionmaker[Session], run_id: int) -> dict[str, list[Counted]]:
    """`problem_counts` of run `run_id`, keyed and ordered by the problems' external ids."""
    with sessions() as session:
        counts, _ = problem_counts(session, repo_runs.get_run(session, run_id=run_id))
        problems = repo_datasets.problems_by_id(session, ids=counts.keys())
    return dict(sorted((problems[pid].external_id, turns) for pid, turns in counts.items()))


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
        rates_a, turns_a = problem_counts(session, a)
        rates_b, turns_b = problem_counts(session, b)
        problems = repo_datasets.problems_by_id(session, ids=rates_a.keys() | rates_b.keys())
    turns = max(turns_a, turns_b)
    counts = [dict.fromkeys((c.value for c in TurnChange), 0) for _ in range(turns)]
    compared = []
    paired: list[list[tuple[int, int, int, int]]] = [[] for _ in range(turns)]
    for problem_id in sorted(problems, key=lambda pid: problems[pid].external_id):
        row_a, row_b = rates_a.get(problem_id), rates_b.get(problem_id)
        cells = []
        for turn in range(turns):
            at_a = row_a[turn] if row_a is not None and turn < turns_a else None
            at_b = row_b[turn] if row_b is not None and turn < turns_b else None
            change = change_of(at_a, at_b)
            counts[turn][change.value] += 1
            if at_a is not None and at_b is not None:
                paired[turn].append((*at_a, *at_b))
            cells.append(
                ComparedTurn(
                    turn_index=turn,
                    pass_a=_rate(at_a),
                    pass_b=_rate(at_b),
                    change=change,
                    difference_interval=None
                    if at_a is None or at_b is None
                    else newcombe_difference(*at_a, *at_b),
                )
            )
        last = min(turns_a, turns_b) - 1
        compared.append(
            ComparedProblem(
                external_id=problems[problem_id].external_id,
                difficulty=problems[problem_id].difficulty,
                turns=cells,
                change=cells[last].change,
            )
        )
    intervals = [bootstrap_difference(pairs) for pairs in paired]
    return RunComparison(
        run_a=run_public(sessions, run_a),
        run_b=run_public(sessions, run_b),
        report_a=stored_report(sessions, run_a, ks=()),
        report_b=stored_report(sessions, run_b, ks=()),
        turns=turns,
        counts=counts,
        problems=compared,
        difference=[_mean_difference(pairs) for pairs in paired],
        difference_interval=intervals,
        paired_problems=[len(pairs) for pairs in paired],
        verdict=[
            difference_verdict(interval, len(pairs))
            for interval, pairs in zip(intervals, paired, strict=True)
        ],
    )


def _rate(counted: Counted | None) -> float | None:
    return None if counted is None else counted[0] / counted[1]


def _mean_difference(pairs: list[tuple[int, int, int, int]]) -> float | None:
    if not pairs:
        return None
    return sum(c_b / n_b - c_a / n_a for c_a, n_a, c_b, n_b in pairs) / len(pairs)
