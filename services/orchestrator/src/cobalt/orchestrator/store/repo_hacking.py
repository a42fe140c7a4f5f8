"""Reads of the hacking cases stored for a run (`analysis/cases.py` writes them).

Like every repository module: keyword-only arguments, the caller owns the transaction.
"""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cobalt.orchestrator.store.models import HackingCase

__all__ = ["case_ids_of_problem", "case_counts_by_problem"]


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
