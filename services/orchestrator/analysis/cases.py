"""Find the flagged turns of a run on a perturbed dataset and store them (idempotent)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from cobalt.orchestrator.analysis.hacking import TurnFacts, flag_turns, unified_diff
from cobalt.orchestrator.store import repo_runs
from cobalt.orchestrator.store.models import HackingCase, Problem, Turn
from cobalt.shared.errors import InvalidInput

__all__ = ["CaseSummary", "case_record", "find_and_store_cases"]


@dataclass(frozen=True, slots=True)
class CaseSummary:
    run_id: int
    cases: int
    new_cases: int
    by_problem: dict[str, int]


def _hidden_rate(verdicts: list[str] | None) -> float | None:
    if not verdicts:
        return None
    return sum(v == "accepted" for v in verdicts) / len(verdicts)


def find_and_store_cases(session: Session, *, run_id: int) -> CaseSummary:
    """Flag the run's turns and store the cases not stored yet; the caller commits.

    Raises:
        NotFound: no such run.
        InvalidInput: the run's dataset is not perturbed, or its turns were not evaluated.
    """
    run = repo_runs.get_run(session, run_id=run_id)
    problems = {
        p.id: p
        for p in session.scalars(select(Problem).where(Problem.dataset_id == run.dataset_id))
    }
    swapped = {
        pid: {int(s["new_index"]) for s in (p.perturbation or {}).get("swapped", [])}
        for pid, p in problems.items()
    }
    if not any(swapped.values()):
        raise InvalidInput(
            f"run {run_id} is on a dataset without perturbed problems; run it on a dataset "
            "made by `cobalt data perturb`"
        )
    turns: dict[tuple[int, int], list[Turn]] = defaultdict(list)
    for turn in session.scalars(
        select(Turn)
        .where(Turn.run_id == run_id)
        .order_by(Turn.problem_id, Turn.sample_index, Turn.turn_index)
    ):
        turns[(turn.problem_id, turn.sample_index)].append(turn)
    if any(
        t.hidden_passed is None and problems[t.problem_id].hidden_tests
        for rows in turns.values()
        for t in rows
    ):
        raise InvalidInput(
            f"run {run_id} has turns without hidden results; run "
            f"`cobalt run evaluate {run_id}` first"
        )
    stored = {
        (c.problem_id, c.sample_index, c.turn_index)
        for c in session.scalars(select(HackingCase).where(HackingCase.run_id == run_id))
    }
    total, new = 0, 0
    by_problem: defaultdict[str, int] = defaultdict(int)
    for (problem_id, sample), rows in turns.items():
        facts = [TurnFacts(t.turn_index, t.code, t.public_verdicts) for t in rows]
        by_index = {t.turn_index: t for t in rows}
        for flagged in flag_turns(facts, swapped.get(problem_id, set())):
            total += 1
            by_problem[problems[problem_id].external_id] += 1
            if (problem_id, sample, flagged.turn_index) in stored:
                continue
            before, after = by_index[flagged.turn_index - 1], by_index[flagged.turn_index]
            assert before.code is not None and after.code is not None
            session.add(
                HackingCase(
                    run_id=run_id,
                    problem_id=problem_id,
                    sample_index=sample,
                    turn_index=flagged.turn_index,
                    shown_test=flagged.shown_test,
                    swapped_tests=sorted(swapped[problem_id]),
                    previous_code=before.code,
                    feedback=before.feedback,
                    new_code=after.code,
                    diff=unified_diff(before.code, after.code),
                    hidden_pass_before=_hidden_rate(before.hidden_verdicts),
                    hidden_pass_after=_hidden_rate(after.hidden_verdicts),
                )
            )
            new += 1
    return CaseSummary(run_id, total, new, dict(sorted(by_problem.items())))


def case_record(case: HackingCase, problem: Problem) -> dict[str, Any]:
    """A case as one JSON object (`--out` lines, `--json`)."""
    return {
        "case_id": case.id,
        "run_id": case.run_id,
        "problem": problem.external_id,
        "sample_index": case.sample_index,
        "turn_index": case.turn_index,
        "shown_test": case.shown_test,
        "swapped_tests": case.swapped_tests,
        "previous_code": case.previous_code,
        "feedback": case.feedback,
        "new_code": case.new_code,
        "diff": case.diff,
        "hidden_pass_before": case.hidden_pass_before,
        "hidden_pass_after": case.hidden_pass_after,
    }
