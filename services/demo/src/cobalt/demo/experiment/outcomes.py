"""What became of each arm's first answers: format-valid share and failures by kind.

Every turn-0 answer of a run is read back from the store and classified
(`cobalt.orchestrator.datasets.generated.screening.Outcome`): passed, no code block,
syntax error, the function missing or renamed, runtime error, wrong answer. The verdicts
are the ones the run's hidden-test evaluation stored on each turn (`Turn.hidden_verdicts`,
for the program it extracted, `Turn.code`): judging every answer again cost the
experiment about a minute on the AVX2 kind. A turn evaluation left without verdicts (its
sandbox failed every retry) is judged here, on the executor of the running stack.
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
    from cobalt.orchestrator.datasets.generated.screening import judge_answers, outcome_of
    from cobalt.orchestrator.store.models import Problem, Turn
    from cobalt.shared.clients import ExecutorClient, ExecutorClientSettings
    from cobalt.shared.contracts import Compare, ProblemRow
    from cobalt.shared.reward.rules import check_format

    with sessions() as session:
        rows = session.execute(
            select(Turn.stored_response, Turn.code, Turn.hidden_verdicts, Problem)
            .join(Problem, Problem.id == Turn.problem_id)
            .where(Turn.run_id == run_id, Turn.turn_index == turn)
            .order_by(Turn.problem_id, Turn.sample_index)
        ).all()
    outcomes, unjudged = [], []
    for response, code, verdicts, problem in rows:
        if verdicts is not None or code is None:
            outcomes.append(outcome_of(code, problem.fn_name or "", verdicts))
            continue
        unjudged.append((ProblemRow.model_validate(problem, from_attributes=True), response))
    if unjudged:
        settings = ExecutorClientSettings(url=executor_url, auth_token=None)
        with ExecutorClient.from_settings(settings) as executor:
            outcomes += judge_answers(unjudged, executor, compare=Compare(compare))
    counts = Counter(outcome.value for outcome in outcomes)
    valid = 0
    for response, *_ in rows:
        read = check_format(response)
        valid += read.program is not None and read.python_fence_ok
    return {
        "answers": len(rows),
        "format_valid": valid / len(rows) if rows else None,
        "outcomes": {kind: counts.get(kind, 0) for kind in OUTCOME_KINDS},
    }
