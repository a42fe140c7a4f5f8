"""What became of each arm's first answers: format-valid share and failures by kind.

Every turn-0 answer of a run is read back from the store and judged again on its
problem's hidden tests (the executor of the running stack, many programs per request),
and classified (`cobalt.orchestrator.datasets.generated.screening.Outcome`): passed, no
code block, syntax error, the function missing or renamed, runtime error, wrong answer.
*Format-valid* is an answer whose program the rollouts would judge and whose one block is
tagged python (the reward's python-fence rule): a gain that is only format shows here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

__all__ = ["OUTCOME_KINDS", "turn_outcomes"]

OUTCOME_KINDS = (
    "passed",
    "no_code",
    "syntax_error",
    "wrong_function_name",
    "runtime_error",
    "wrong_answer",
)


def turn_outcomes(
    sessions: sessionmaker[Session], run_id: int, executor_url: str, *, compare: str, turn: int = 0
) -> dict[str, Any]:
    """`{"answers", "format_valid", "outcomes": {kind: count}}` of the run's `turn` answers."""
    from cobalt.orchestrator.datasets.generated.screening import judge_answers
    from cobalt.orchestrator.store.models import Problem, Turn
    from cobalt.shared.clients import ExecutorClient, ExecutorClientSettings
    from cobalt.shared.contracts import Compare, ProblemRow
    from cobalt.shared.reward.rules import check_format

    with sessions() as session:
        rows = session.execute(
            select(Turn.stored_response, Problem)
            .join(Problem, Problem.id == Turn.problem_id)
            .where(Turn.run_id == run_id, Turn.turn_index == turn)
            .order_by(Turn.problem_id, Turn.sample_index)
        ).all()
        answers = [
            (
                ProblemRow.model_validate(
                    {
                        "external_id": problem.external_id,
                        "statement": problem.statement,
                        "test_style": problem.test_style,
                        "fn_name": problem.fn_name,
                        "hidden_tests": problem.hidden_tests,
                    }
                ),
                response,
            )
            for response, problem in rows
        ]
    settings = ExecutorClientSettings(url=executor_url, auth_token=None)
    with ExecutorClient.from_settings(settings) as executor:
        outcomes = judge_answers(answers, executor, compare=Compare(compare)) if answers else []
    counts = Counter(outcome.value for outcome in outcomes)
    valid = 0
    for _, response in answers:
        read = check_format(response)
        valid += read.program is not None and read.python_fence_ok
    return {
        "answers": len(answers),
        "format_valid": valid / len(answers) if answers else None,
        "outcomes": {kind: counts.get(kind, 0) for kind in OUTCOME_KINDS},
    }
