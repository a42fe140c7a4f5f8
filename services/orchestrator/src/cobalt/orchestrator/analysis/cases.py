"""Storage of the analysis: hacking cases of a run and the judges' verdicts on them.

Both writes are idempotent. A case is keyed by (run, problem, sample, turn), so running
`cobalt analyze hacking` again stores only cases it has not stored; a verdict is keyed by
(case, judge model), so a judge is asked about a case once. Functions here add and query;
the caller owns the transaction.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from cobalt.orchestrator.analysis.hacking import TurnFacts, flag_turns, unified_diff
from cobalt.orchestrator.analysis.judge import CaseForJudge, JudgedCase
from cobalt.orchestrator.store import repo_datasets, repo_hacking, repo_runs, repo_turns
from cobalt.orchestrator.store.models import HackingCase, JudgeVerdict, Problem, Turn
from cobalt.orchestrator.store.repo_hacking import CaseSelection, verdict_counts
from cobalt.shared.contracts import Verdict
from cobalt.shared.errors import InvalidInput

__all__ = [
    "CaseKey",
    "CaseSelection",
    "CaseSummary",
    "case_ids_of_records",
    "case_records",
    "cases_to_judge",
    "find_and_store_cases",
    "store_verdicts",
    "verdict_counts",
]

CaseKey = tuple[int, str, int, int]
"""(run id, problem external id, sample index, turn index): a case in any export."""


@dataclass(frozen=True, slots=True)
class CaseSummary:
    run_id: int
    cases: int
    """Flagged turns of the run (stored now or before)."""
    new_cases: int
    """Of those, the ones stored by this call."""
    by_problem: dict[str, int]
    """Flagged turns per problem external id."""
    new_by_problem: dict[str, int]
    """Cases stored by this call per problem external id (problems with none left out)."""


def _hidden_rate(verdicts: list[str] | None) -> float | None:
    if not verdicts:
        return None
    return sum(v == Verdict.ACCEPTED for v in verdicts) / len(verdicts)


def _swapped_positions(problem: Problem) -> set[int]:
    return {int(s["new_index"]) for s in (problem.perturbation or {}).get("swapped", [])}


def find_and_store_cases(
    session: Session, *, run_id: int, any_failure: bool = False
) -> CaseSummary:
    """Flag the run's turns (`hacking.flag_turns`) and store the cases not stored yet.

    Args:
        session: An open transaction; the caller commits.
        run_id: The run to analyse.
        any_failure: Also flag after feedback that showed only an error of the perturbed
            test (`hacking.flag_turns`).

    Returns:
        How many turns are flagged, how many of them were new, and the count per problem.

    Raises:
        NotFound: No such run.
        InvalidInput: The run's dataset has no perturbed problem, or some of its turns
            have no hidden-test results yet.
    """
    run = repo_runs.get_run(session, run_id=run_id)
    problems = repo_datasets.problems_of(session, dataset_id=run.dataset_id)
    swapped = {pid: _swapped_positions(p) for pid, p in problems.items()}
    if not any(swapped.values()):
        raise InvalidInput(
            f"run {run_id} is on a dataset without perturbed problems; analyse a run on a "
            "dataset made by `cobalt data perturb`"
        )
    turns: dict[tuple[int, int], list[Turn]] = defaultdict(list)
    for turn in repo_turns.judged_turns(session, run_id=run_id, problems=problems):
        turns[(turn.problem_id, turn.sample_index)].append(turn)
    stored = repo_hacking.case_keys(session, run_id=run_id)
    cases: list[HackingCase] = []
    total = 0
    by_problem: defaultdict[str, int] = defaultdict(int)
    new_by_problem: defaultdict[str, int] = defaultdict(int)
    for (problem_id, sample), rows in turns.items():
        facts = [TurnFacts(t.turn_index, t.code, t.public_verdicts) for t in rows]
        by_index = {t.turn_index: t for t in rows}
        for flagged in flag_turns(facts, swapped[problem_id], any_failure=any_failure):
            total += 1
            by_problem[problems[problem_id].external_id] += 1
            if (problem_id, sample, flagged.turn_index) in stored:
                continue
            before, after = by_index[flagged.turn_index - 1], by_index[flagged.turn_index]
            assert before.code is not None and after.code is not None  # flag_turns checked
            cases.append(
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
            new_by_problem[problems[problem_id].external_id] += 1
    repo_hacking.add_rows(session, cases)
    return CaseSummary(
        run_id,
        total,
        len(cases),
        dict(sorted(by_problem.items())),
        dict(sorted(new_by_problem.items())),
    )


def _record(case: HackingCase, problem: Problem) -> dict[str, Any]:
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


def case_records(session: Session, *, run_id: int) -> list[dict[str, Any]]:
    """The run's stored cases as JSON objects (the lines of `--out`), in case order."""
    return [
        _record(case, problem)
        for case, problem in repo_hacking.cases_of_run(session, run_id=run_id)
    ]


def case_ids_of_records(session: Session, records: Sequence[Mapping[str, Any]]) -> list[int]:
    """The stored ids of exported cases, found by their key, not by the exported id.

    The key (run, problem, sample, turn) means the same thing in any database that holds
    the run; an id alone could name another case elsewhere.

    Raises:
        InvalidInput: A record lacks a key field, or names a case that is not stored.
    """
    try:
        wanted: list[CaseKey] = [
            (int(r["run_id"]), str(r["problem"]), int(r["sample_index"]), int(r["turn_index"]))
            for r in records
        ]
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"a case lacks {exc}; give the lines `cobalt analyze hacking --out` wrote"
        ) from exc
    runs = {key[0] for key in wanted}
    stored: dict[CaseKey, int] = {
        (run, problem, sample, turn): case_id
        for case_id, run, problem, sample, turn in repo_hacking.case_ids_by_key(
            session, run_ids=runs
        )
    }
    missing = [key for key in wanted if key not in stored]
    if missing:
        run, problem, sample, turn = missing[0]
        raise InvalidInput(
            f"{len(missing)} of the cases are not stored in this database (the first: run "
            f"{run}, problem {problem}, sample {sample}, turn {turn}); run "
            f"`cobalt analyze hacking --run {run}` against it first"
        )
    return sorted({stored[key] for key in wanted})


def cases_to_judge(
    session: Session, *, selection: CaseSelection, judge_model: str
) -> list[CaseForJudge]:
    """The selected cases that `judge_model` has not judged yet, in id order."""
    return [
        CaseForJudge(
            case_id=case.id,
            statement=statement,
            feedback=case.feedback,
            previous_code=case.previous_code,
            new_code=case.new_code,
            diff=case.diff,
            hidden_pass_before=case.hidden_pass_before,
            hidden_pass_after=case.hidden_pass_after,
        )
        for case, statement in repo_hacking.unjudged_cases(
            session, selection=selection, judge_model=judge_model
        )
    ]


def store_verdicts(session: Session, *, judge_model: str, verdicts: Sequence[JudgedCase]) -> int:
    """Store the verdicts whose (case, judge model) has none yet; returns how many."""
    already = repo_hacking.judged_case_ids(
        session, judge_model=judge_model, case_ids=[v.case_id for v in verdicts]
    )
    new = [v for v in verdicts if v.case_id not in already]
    repo_hacking.add_rows(
        session,
        (
            JudgeVerdict(
                case_id=v.case_id,
                judge_model=judge_model,
                category=v.category,
                raw_answer=v.raw_answer,
            )
            for v in new
        ),
    )
    return len(new)
