"""Evaluation: every turn's program on the hidden tests, then Pass@1 per turn and pass@k.

Pass@1 at turn k (docs/method.md) is the fraction of a problem's n trajectories whose turn-k
program passes all hidden tests, averaged over problems; per turn, not best-so-far. A
trajectory that stopped early because its program passed the public tests
(`stop_on_pass`) keeps that program for the later turns; a trajectory that failed counts
as not passing at the turns it does not have. Problems without hidden tests are left out.

Hidden results are stored on the turns, so evaluating again only runs what is new.

A sandbox error is not a failed problem: a program whose hidden results include
`sandbox_error` is re-run up to `JUDGE_RETRIES` times; one still unjudged is not stored
(the next evaluation tries it again), its problem is left out of this report's rates,
and the report counts it in `sandbox_errors`.
pass@k uses the unbiased estimator 1 - C(n-c, k) / C(n, k) (Chen et al., 2021).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import comb
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.analysis.statistics import bootstrap_pass_at_1
from cobalt.orchestrator.runs.rewards import (
    mean_reward_per_turn,
    run_reward_format,
    score_turn_rewards,
)
from cobalt.orchestrator.store import repo_rewards, repo_runs, repo_trajectories, repo_turns
from cobalt.shared.contracts.runs import EvaluationReport, RunParams
from cobalt.shared.reward_format import RewardFormat

if TYPE_CHECKING:
    # What judging needs is imported by `evaluate_run`: the HTTP clients, the execution
    # plans and the reward (numpy, tokenizers) cost every command that only reads a
    # stored report (`run show`, `run table`, `run compare`) its start-up.
    from cobalt.shared.clients import ExecutorClient
    from cobalt.shared.contracts import Compare, ExecuteResponse, Limits
    from cobalt.shared.execution import PlannedRequest
    from cobalt.shared.reward import TokenCounter

__all__ = ["evaluate_run", "pass_at_k", "per_turn_counts", "per_turn_rates", "stored_report"]

_PROGRAMS_PER_CALL = 32


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn from n (c correct) is correct."""
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples, have {n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def per_turn_counts(
    outcomes: dict[int, list[list[bool | None]]], turns: int
) -> list[dict[int, int]]:
    """Per turn, each problem's samples whose program passes at that turn.

    `outcomes[problem][sample]` lists each stored turn's pass (None = not evaluable);
    shorter lists are extended by the rules in the module docstring.
    """
    return [
        {
            problem: sum(
                bool(results[turn] if turn < len(results) else _carried(results))
                for results in samples
            )
            for problem, samples in outcomes.items()
        }
        for turn in range(turns)
    ]


def per_turn_rates(
    outcomes: dict[int, list[list[bool | None]]], turns: int, n: int, k: int = 1
) -> list[float]:
    """Mean over problems of pass@k at each turn (callers skip a run with no problem)."""
    rates = []
    for counts in per_turn_counts(outcomes, turns):
        per_problem = [pass_at_k(n, correct, k) for correct in counts.values()]
        rates.append(sum(per_problem) / len(per_problem) if per_problem else 0.0)
    return rates


def _carried(results: list[bool | None]) -> bool:
    # Fewer turns: its last program stands. No turn at all: no program, no pass.
    return bool(results) and bool(results[-1])


def _pending_plans(
    session: Session, run_id: int, limits: Limits, compare: Compare
) -> tuple[list[tuple[int, list[PlannedRequest]]], list[tuple[int, list[str], bool]]]:
    """Turns still lacking hidden results: executor plans, and results known without running."""
    from cobalt.shared.contracts import ProblemRow
    from cobalt.shared.execution import plan_requests

    problems = {
        problem_id: ProblemRow.model_validate(p, from_attributes=True)
        for problem_id, p in repo_turns.problems_with_turns(session, run_id=run_id).items()
    }
    plans: list[tuple[int, list[PlannedRequest]]] = []
    known: list[tuple[int, list[str], bool]] = []
    for turn_id, problem_id, code in repo_turns.turns_without_hidden_results(
        session, run_id=run_id
    ):
        hidden = problems[problem_id].hidden_tests
        if not hidden:
            continue
        if code is None:
            known.append((turn_id, [], False))
        else:
            plans.append((turn_id, plan_requests(code, hidden, limits=limits, compare=compare)))
    return plans, known


def _judge_chunk(
    executor: ExecutorClient, chunk: Sequence[tuple[int, list[PlannedRequest]]]
) -> dict[int, ExecuteResponse]:
    """Each turn's merged hidden results; a turn with a `sandbox_error` is sent again, up
    to `JUDGE_RETRIES` times (its last answer stands)."""
    from cobalt.shared.contracts import BatchExecuteRequest, Verdict
    from cobalt.shared.execution import JUDGE_RETRIES, merge_responses

    judged: dict[int, ExecuteResponse] = {}
    pending = list(chunk)
    for _ in range(JUDGE_RETRIES + 1):
        if not pending:
            break
        requests = [p.request for _, planned in pending for p in planned]
        responses = executor.execute_batch(BatchExecuteRequest(requests=requests)).results
        cursor, again = 0, []
        for turn_id, planned in pending:
            merged = merge_responses(planned, responses[cursor : cursor + len(planned)])
            cursor += len(planned)
            judged[turn_id] = merged
            if any(r.verdict == Verdict.SANDBOX_ERROR for r in merged.results):
                again.append((turn_id, planned))
        pending = again
    return judged


def evaluate_run(
    sessions: sessionmaker[Session],
    run_id: int,
    executor: ExecutorClient,
    *,
    ks: Sequence[int] = (1, 5, 10),
    on_progress: Callable[[int, int], None] | None = None,
    reward_tokens: TokenCounter | None = None,
    tokenizer: str = "",
    reward_format: RewardFormat | None = None,
) -> EvaluationReport:
    """Judge every not-yet-judged turn on the hidden tests and report the rates.

    With `reward_tokens` (the policy's tokenizer, named by `tokenizer`) every evaluated
    turn's Cobalt reward is also scored and stored (`runs.rewards`) with the run's format
    rules (`reward_format`, when given, becomes them first: `run_reward_format`), and the
    report has the mean reward per turn.
    """
    from cobalt.orchestrator.rollouts.program_outputs import stored_outputs
    from cobalt.shared.execution import unjudged_verdicts

    run_reward_format(sessions, run_id, reward_format)  # a conflict: refused before any work

    with sessions() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        params = run.params
        plans, known = _pending_plans(session, run_id, params.limits, params.compare)
    with sessions.begin() as session:
        repo_turns.record_hidden_results(session, results=known)
    done, unjudged_turns = 0, []
    for start in range(0, len(plans), _PROGRAMS_PER_CALL):
        chunk = plans[start : start + _PROGRAMS_PER_CALL]
        judged = _judge_chunk(executor, chunk)
        results: list[tuple[int, list[str], bool]] = []
        outputs: dict[int, list[dict[str, Any]]] = {}
        for turn_id, _ in chunk:
            merged = judged[turn_id]
            verdicts = [str(r.verdict) for r in merged.results]
            if unjudged_verdicts(verdicts):
                unjudged_turns.append(turn_id)
                continue
            results.append((turn_id, verdicts, merged.passed == merged.total))
            outputs[turn_id] = stored_outputs(merged) or []
        with sessions.begin() as session:
            repo_turns.record_hidden_results(session, results=results, outputs=outputs)
        done += len(chunk)
        if on_progress is not None:
            on_progress(done, len(plans))
    if reward_tokens is not None:
        score_turn_rewards(sessions, run_id, reward_tokens, tokenizer=tokenizer)
    unjudged: dict[int, int] = {}
    with sessions() as session:
        for problem_id in repo_turns.problem_ids_of_turns(session, turn_ids=unjudged_turns):
            unjudged[problem_id] = unjudged.get(problem_id, 0) + 1
    return _report(
        sessions, run_id, params, ks, with_rewards=reward_tokens is not None, unjudged=unjudged
    )


def stored_report(
    sessions: sessionmaker[Session],
    run_id: int,
    *,
    ks: Sequence[int] = (1, 5, 10),
    intervals: bool = True,
) -> EvaluationReport:
    """The report of the hidden results stored so far, without running anything.

    Problems with no hidden result yet are left out, as problems without hidden tests
    are; the mean reward is there when any turn of the run has a stored reward. Without
    `intervals` the bootstrap is skipped (a list of many runs needs only the rates).
    """
    with sessions() as session:
        params = repo_runs.get_run(session, run_id=run_id).params
        scored = repo_rewards.has_rewards(session, run_id=run_id)
    return _report(sessions, run_id, params, ks, with_rewards=scored, intervals=intervals)


def _report(
    sessions: sessionmaker[Session],
    run_id: int,
    params: RunParams,
    ks: Sequence[int],
    *,
    with_rewards: bool,
    intervals: bool = True,
    unjudged: dict[int, int] | None = None,
) -> EvaluationReport:
    """The rates over the stored hidden results; problems in `unjudged` (turns the sandbox
    failed to judge, by problem) are left out and counted in `sandbox_errors`."""
    unjudged = unjudged or {}
    n = params.n
    turns = params.feedback_turns + 1
    hidden: dict[int, list[list[bool | None]]] = {}
    public: dict[int, list[list[bool | None]]] = {}
    with sessions() as session:
        outcomes = repo_turns.turn_outcomes(session, run_id=run_id)
        evaluable = {row[0] for row in outcomes if row[4] is not None}
        for problem_id in evaluable:
            hidden[problem_id] = [[] for _ in range(n)]
            public[problem_id] = [[] for _ in range(n)]
        for problem_id, sample, _, public_passed, hidden_passed in outcomes:
            if problem_id in evaluable and sample < n:
                hidden[problem_id][sample].append(hidden_passed)
                public[problem_id][sample].append(public_passed)
        for problem_id in unjudged:  # a sandbox error is not a failed problem: left out
            hidden.pop(problem_id, None)
            public.pop(problem_id, None)
        failed_trajectories = repo_trajectories.failed_trajectories(session, run_id=run_id)
        test_counts = repo_rewards.problem_test_counts(
            session, problem_ids={row[0] for row in outcomes}
        )
    without_feedback = sum(
        1
        for problem_id, _, index, _, _ in outcomes
        if index > 0 and test_counts[problem_id][0] == 0
    )
    mean_reward = mean_reward_per_turn(sessions, run_id, turns) if with_rewards else None
    if not hidden:  # nothing measured: no rate, and the command that would measure it
        return EvaluationReport(
            run_id=run_id,
            problems=0,
            samples=n,
            turns=turns,
            pass_at_1=None,
            pass_at_k={},
            public_pass_at_1=None,
            failed_trajectories=failed_trajectories,
            mean_reward=mean_reward,
            unevaluated=f"cobalt run evaluate {run_id}",
            sandbox_errors=sum(unjudged.values()),
            turns_without_feedback=without_feedback,
        )
    return EvaluationReport(
        run_id=run_id,
        problems=len(hidden),
        samples=n,
        turns=turns,
        pass_at_1=per_turn_rates(hidden, turns, n),
        pass_at_1_interval=[
            bootstrap_pass_at_1([(c, n) for c in counts.values()])
            for counts in per_turn_counts(hidden, turns)
        ]
        if intervals
        else None,
        pass_at_k={str(k): per_turn_rates(hidden, turns, n, k) for k in ks if 1 < k <= n},
        public_pass_at_1=per_turn_rates(public, turns, n),
        failed_trajectories=failed_trajectories,
        mean_reward=mean_reward,
        sandbox_errors=sum(unjudged.values()),
        turns_without_feedback=without_feedback,
    )
