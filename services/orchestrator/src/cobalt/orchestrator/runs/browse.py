"""A run read for people: its rates from stored results, its problems, one problem in full.

Nothing here runs a program: the hidden-test results are the ones evaluation stored, so
these views are cheap enough to poll while a run is still going.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.analysis.hacking import unified_diff
from cobalt.orchestrator.analysis.statistics import wilson_interval
from cobalt.orchestrator.rollouts.conversation import messages_of_turns
from cobalt.orchestrator.runs.evaluation import stored_report
from cobalt.orchestrator.store import (
    repo_datasets,
    repo_hacking,
    repo_rewards,
    repo_runs,
    repo_trajectories,
    repo_turns,
)
from cobalt.orchestrator.store.models import (
    Dataset,
    Trajectory,
    Turn,
    TurnReward,
)
from cobalt.shared.contracts.browse import (
    ProblemOutcome,
    RunProblemDetail,
    RunProblemRow,
    RunProblemsPublic,
    TrajectoryDetail,
    TurnDetail,
    TurnRewardPublic,
)
from cobalt.shared.contracts.runs import EvaluationReport, TurnPublic
from cobalt.shared.contracts.statuses import TrajectoryStatus
from cobalt.shared.errors import NotFound
from cobalt.shared.extraction import THINK_CLOSE, THINK_OPEN, answer_part

__all__ = ["outcome_of", "run_problem_detail", "run_problems", "run_report", "split_reasoning"]


def run_report(
    sessions: sessionmaker[Session],
    run_id: int,
    *,
    ks: Sequence[int] = (1, 5, 10),
    intervals: bool = True,
) -> EvaluationReport:
    """Pass@1 and pass@k per turn from the hidden results stored so far (no executor)."""
    return stored_report(sessions, run_id, ks=ks, intervals=intervals)


def split_reasoning(response: str) -> tuple[str, str]:
    """(reasoning, answer) of a response, split where the answer starts.

    The answer is `extraction.answer_part`'s, so it is what code was extracted from; the
    reasoning is the rest with the think tags dropped.
    """
    answer = answer_part(response)
    reasoning = response[: len(response) - len(answer)]
    if reasoning.endswith(THINK_CLOSE):
        reasoning = reasoning[: -len(THINK_CLOSE)]
    return reasoning.replace(THINK_OPEN, "").strip(), answer.strip()


def outcome_of(rate: float | None) -> ProblemOutcome:
    if rate is None:
        return ProblemOutcome.UNEVALUATED
    if rate >= 1.0:
        return ProblemOutcome.SOLVED
    return ProblemOutcome.PARTIAL if rate > 0 else ProblemOutcome.UNSOLVED


def _rate(values: list[bool]) -> float | None:
    return sum(values) / len(values) if values else None


def _interval(values: list[bool]) -> tuple[float, float] | None:
    return wilson_interval(sum(values), len(values))


def run_problems(sessions: sessionmaker[Session], run_id: int) -> RunProblemsPublic:
    """Every problem of the run with its pass rates at the first and the last turn.

    A trajectory's "last" program is its last stored turn (a trajectory that stopped on
    passing keeps that program, as evaluation counts it).
    """
    with sessions() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        problems = repo_datasets.problems_of(session, dataset_id=run.dataset_id)
        trajectories: dict[int, list[Trajectory]] = defaultdict(list)
        for trajectory in repo_trajectories.trajectories_of(session, run_id=run_id):
            trajectories[trajectory.problem_id].append(trajectory)
        turns: dict[tuple[int, int], list[tuple[int, bool, bool | None]]] = defaultdict(list)
        for problem_id, sample, index, public, hidden in repo_turns.turn_outcomes(
            session, run_id=run_id
        ):
            turns[(problem_id, sample)].append((index, public, hidden))
        rewards = repo_rewards.mean_reward_by_problem(session, run_id=run_id)
        flagged = repo_hacking.case_counts_by_problem(session, run_id=run_id)
    items = []
    for problem_id in sorted(trajectories, key=lambda pid: problems[pid].external_id):
        problem = problems[problem_id]
        samples = [turns.get((problem_id, t.sample_index), []) for t in trajectories[problem_id]]
        first = [s[0][2] for s in samples if s and s[0][0] == 0 and s[0][2] is not None]
        last = [s[-1][2] for s in samples if s and s[-1][2] is not None]
        if not problem.hidden_tests:
            first, last = [], []
        hidden_last = _rate([bool(v) for v in last])
        items.append(
            RunProblemRow(
                problem_id=problem_id,
                external_id=problem.external_id,
                difficulty=problem.difficulty,
                samples=len(samples),
                turns=max((len(s) for s in samples), default=0),
                failed=sum(t.status == TrajectoryStatus.FAILED for t in trajectories[problem_id]),
                hidden_pass_first=_rate([bool(v) for v in first]),
                hidden_pass_last=hidden_last,
                hidden_pass_first_interval=_interval([bool(v) for v in first]),
                hidden_pass_last_interval=_interval([bool(v) for v in last]),
                # No turn written yet: nothing measured. Otherwise a sample without a turn
                # (its trajectory failed first) counts as not passing, as in evaluation.
                public_pass_last=_rate([bool(s and s[-1][1]) for s in samples])
                if any(samples)
                else None,
                mean_reward=rewards.get(problem_id),
                flagged=flagged.get(problem_id, 0),
                outcome=outcome_of(hidden_last),
            )
        )
    return RunProblemsPublic(run_id=run_id, items=items, total=len(items))


def _reward(row: TurnReward | None) -> TurnRewardPublic | None:
    return None if row is None else TurnRewardPublic.model_validate(row, from_attributes=True)


def _details(
    turns: list[Turn], rewards: dict[int, TurnReward], cases: dict[tuple[int, int], int]
) -> list[TurnDetail]:
    details = []
    previous: Turn | None = None
    for turn, messages in zip(turns, messages_of_turns(turns), strict=True):
        reasoning, answer = split_reasoning(turn.raw_response)
        diff = None
        if previous is not None and previous.code is not None and turn.code is not None:
            diff = unified_diff(previous.code, turn.code)
        public = TurnPublic.model_validate(turn, from_attributes=True)
        details.append(
            TurnDetail(
                **{**public.model_dump(), "messages": messages},
                turn_id=turn.id,
                reasoning=reasoning,
                answer=answer,
                diff=diff,
                reward=_reward(rewards.get(turn.id)),
                hacking_case_id=cases.get((turn.sample_index, turn.turn_index)),
            )
        )
        previous = turn
    return details


def run_problem_detail(
    sessions: sessionmaker[Session], run_id: int, external_id: str
) -> RunProblemDetail:
    """One problem of a run: every trajectory with every turn, diff and reward.

    Raises:
        NotFound: no such run, or its dataset has no such problem.
    """
    with sessions() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        problem = repo_datasets.get_problem(
            session, dataset_id=run.dataset_id, external_id=external_id
        )
        if problem is None:
            raise NotFound(f"run {run_id}'s dataset has no problem {external_id!r}")
        dataset = session.get(Dataset, run.dataset_id)
        by_sample: dict[int, list[Turn]] = defaultdict(list)
        for turn in repo_turns.turns_of_problem(session, run_id=run_id, problem_id=problem.id):
            by_sample[turn.sample_index].append(turn)
        turn_ids = [t.id for rows in by_sample.values() for t in rows]
        rewards = repo_rewards.rewards_of_turns(session, turn_ids=turn_ids)
        cases = repo_hacking.case_ids_of_problem(session, run_id=run_id, problem_id=problem.id)
        trajectories = [
            TrajectoryDetail(
                sample_index=t.sample_index,
                status=TrajectoryStatus(t.status),
                error=t.error,
                turns=_details(by_sample.get(t.sample_index, []), rewards, cases),
            )
            for t in repo_trajectories.trajectories_of(
                session, run_id=run_id, problem_id=problem.id
            )
        ]
        swapped = sorted(
            int(s["new_index"]) for s in (problem.perturbation or {}).get("swapped", [])
        )
        return RunProblemDetail(
            run_id=run_id,
            problem_id=problem.id,
            dataset=dataset.name if dataset is not None else "",
            external_id=problem.external_id,
            difficulty=problem.difficulty,
            statement=problem.statement,
            public_tests=len(problem.public_tests),
            hidden_tests=len(problem.hidden_tests),
            swapped_tests=swapped,
            reward_format=run.params.reward_format,
            trajectories=trajectories,
        )
