"""The hacking cases stored for a run and the judges' verdicts on them (`analysis/cases.py`
decides what to store).

Like every repository module: keyword-only arguments, the caller owns the transaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from cobalt.orchestrator.store.models import HackingCase, JudgeVerdict, Problem

__all__ = [
    "CaseSelection",
    "add_rows",
    "case_counts_by_problem",
    "case_ids_by_key",
    "case_keys",
    "case_ids_of_problem",
    "cases_of_run",
    "judged_case_ids",
    "unjudged_cases",
    "verdicts_of_run",
    "verdict_counts",
]


@dataclass(frozen=True, slots=True)
class CaseSelection:
    """Which stored cases a judge command covers: a run's, or a list of ids."""

    run_id: int | None = None
    case_ids: tuple[int, ...] = ()

    def where(self) -> ColumnElement[bool]:
        if self.run_id is not None:
            return HackingCase.run_id == self.run_id
        return HackingCase.id.in_(self.case_ids)


def cases_of_run(session: Session, *, run_id: int) -> list[tuple[HackingCase, Problem]]:
    """The run's stored cases with their problems, in case order."""
    return [
        (case, problem)
        for case, problem in session.execute(
            select(HackingCase, Problem)
            .join(Problem, Problem.id == HackingCase.problem_id)
            .where(HackingCase.run_id == run_id)
            .order_by(HackingCase.id)
        )
    ]


def verdicts_of_run(session: Session, *, run_id: int) -> list[tuple[int, str, str]]:
    """(case id, judge model, category) of every verdict on the run's cases, by judge."""
    rows = session.execute(
        select(JudgeVerdict.case_id, JudgeVerdict.judge_model, JudgeVerdict.category)
        .join(HackingCase, HackingCase.id == JudgeVerdict.case_id)
        .where(HackingCase.run_id == run_id)
        .order_by(JudgeVerdict.judge_model)
    )
    return [(case_id, judge_model, category) for case_id, judge_model, category in rows]


def unjudged_cases(
    session: Session, *, selection: CaseSelection, judge_model: str
) -> list[tuple[HackingCase, str]]:
    """The selected cases `judge_model` has not judged, with their problems' statements, in
    id order."""
    judged = select(JudgeVerdict.case_id).where(JudgeVerdict.judge_model == judge_model)
    return [
        (case, statement)
        for case, statement in session.execute(
            select(HackingCase, Problem.statement)
            .join(Problem, Problem.id == HackingCase.problem_id)
            .where(selection.where(), HackingCase.id.not_in(judged))
            .order_by(HackingCase.id)
        )
    ]


def judged_case_ids(session: Session, *, judge_model: str, case_ids: Iterable[int]) -> set[int]:
    """Of `case_ids`, those `judge_model` has a stored verdict on."""
    return set(
        session.scalars(
            select(JudgeVerdict.case_id).where(
                JudgeVerdict.judge_model == judge_model, JudgeVerdict.case_id.in_(list(case_ids))
            )
        )
    )


def add_rows(session: Session, rows: Iterable[HackingCase | JudgeVerdict]) -> None:
    """Store new case or verdict rows (the caller left out those already stored)."""
    session.add_all(rows)
    session.flush()


def case_keys(session: Session, *, run_id: int) -> set[tuple[int, int, int]]:
    """(problem id, sample, turn index) of every case stored for the run."""
    return {
        (problem_id, sample, turn)
        for problem_id, sample, turn in session.execute(
            select(HackingCase.problem_id, HackingCase.sample_index, HackingCase.turn_index).where(
                HackingCase.run_id == run_id
            )
        )
    }


def case_ids_by_key(
    session: Session, *, run_ids: Iterable[int]
) -> list[tuple[int, int, str, int, int]]:
    """(case id, run id, problem external id, sample, turn index) of the runs' cases."""
    return [
        (case_id, run, problem, sample, turn)
        for case_id, run, problem, sample, turn in session.execute(
            select(
                HackingCase.id,
                HackingCase.run_id,
                Problem.external_id,
                HackingCase.sample_index,
                HackingCase.turn_index,
            )
            .join(Problem, Problem.id == HackingCase.problem_id)
            .where(HackingCase.run_id.in_(list(run_ids)))
        )
    ]


def verdict_counts(session: Session, *, selection: CaseSelection) -> dict[str, dict[str, int]]:
    """Stored verdicts on the selected cases: judge model -> category -> count, sorted."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for judge_model, category in session.execute(
        select(JudgeVerdict.judge_model, JudgeVerdict.category)
        .join(HackingCase, HackingCase.id == JudgeVerdict.case_id)
        .where(selection.where())
    ):
        counts[judge_model][category] += 1
    return {model: dict(sorted(c.items())) for model, c in sorted(counts.items())}


def case_counts_by_problem(session: Session, *, run_id: int) -> dict[int, int]:
    """Stored cases per problem id of the run (problems with none left out)."""
    return {
        int(problem_id): int(count)
        for problem_id, count in session.execute(
            select(HackingCase.problem_id, func.count(HackingCase.id))
            .where(HackingCase.run_id == run_id)
            .group_by(HackingCase.problem_id)
        )
    }


def case_ids_of_problem(
    session: Session, *, run_id: int, problem_id: int
) -> dict[tuple[int, int], int]:
    """Case id by (sample, turn index) of one problem of the run."""
    return {
        (sample, index): case_id
        for case_id, sample, index in session.execute(
            select(HackingCase.id, HackingCase.sample_index, HackingCase.turn_index).where(
                HackingCase.run_id == run_id, HackingCase.problem_id == problem_id
            )
        )
    }
