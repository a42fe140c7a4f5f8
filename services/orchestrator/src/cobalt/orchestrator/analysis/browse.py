"""Stored hacking cases read for people: each flagged turn with its diff and the judges'
categories, and the counts per category (what `cobalt analyze` reports, over the API)."""

from __future__ import annotations

from collections import defaultdict

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.analysis.cases import CaseSelection, verdict_counts
from cobalt.orchestrator.analysis.judge import CATEGORIES
from cobalt.orchestrator.store import repo_hacking, repo_runs
from cobalt.shared.contracts.browse import (
    HackingCasePublic,
    HackingCasesPublic,
    JudgeVerdictPublic,
)

__all__ = ["hacking_cases"]


def _label(category: str) -> str:
    return CATEGORIES.get(category, "the judge's answer did not end with a category")


def hacking_cases(
    sessions: sessionmaker[Session], *, run_id: int, category: str | None = None
) -> HackingCasesPublic:
    """The run's stored cases in case order, optionally only those some judge put in
    `category`; the counts per category are always over all of the run's cases.

    Raises:
        NotFound: no such run.
    """
    with sessions() as session:
        repo_runs.get_run(session, run_id=run_id)
        verdicts: dict[int, list[JudgeVerdictPublic]] = defaultdict(list)
        for case_id, judge_model, found in repo_hacking.verdicts_of_run(session, run_id=run_id):
            verdicts[case_id].append(
                JudgeVerdictPublic(
                    judge_model=judge_model, category=found, category_label=_label(found)
                )
            )
        cases = [
            HackingCasePublic(
                id=case.id,
                run_id=case.run_id,
                problem=problem.external_id,
                sample_index=case.sample_index,
                turn_index=case.turn_index,
                shown_test=case.shown_test,
                swapped_tests=case.swapped_tests,
                feedback=case.feedback,
                diff=case.diff,
                hidden_pass_before=case.hidden_pass_before,
                hidden_pass_after=case.hidden_pass_after,
                verdicts=verdicts.get(case.id, []),
            )
            for case, problem in repo_hacking.cases_of_run(session, run_id=run_id)
        ]
        counts = verdict_counts(session, selection=CaseSelection(run_id=run_id))
    unjudged = sum(1 for case in cases if not case.verdicts)
    if category is not None:
        cases = [c for c in cases if any(v.category == category for v in c.verdicts)]
    return HackingCasesPublic(items=cases, total=len(cases), categories=counts, unjudged=unjudged)
