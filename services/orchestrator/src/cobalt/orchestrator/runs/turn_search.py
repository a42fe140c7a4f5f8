"""Finding turns in a run: by verdict, turn, problem, response text and reward component
ranges; and one turn's tests with the program's outputs.

The questions a researcher asks of a run's failures ("which turn-2 programs time out?",
"which turns earned an improvement bonus but still fail hidden tests?") are filters over
the stored turns and their rewards; they run in the database, a page at a time
(`store/repo_turn_search.py` has the queries and the filters).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.rollouts.program_outputs import shown_tests
from cobalt.orchestrator.store import repo_runs, repo_turn_search
from cobalt.orchestrator.store.repo_turn_search import REWARD_COMPONENTS, TestSet, TurnFilters
from cobalt.shared.contracts.browse import (
    TurnMatch,
    TurnMatchesPage,
    TurnRewardPublic,
    TurnTests,
)

__all__ = ["REWARD_COMPONENTS", "TestSet", "TurnFilters", "find_turns", "turn_tests"]


def find_turns(
    sessions: sessionmaker[Session],
    run_id: int,
    filters: TurnFilters,
    *,
    offset: int = 0,
    limit: int = 100,
) -> TurnMatchesPage:
    """A page of the run's turns matching `filters`, by problem, sample and turn.

    Raises:
        NotFound: no such run.
    """
    with sessions() as session:
        repo_runs.get_run(session, run_id=run_id)
        total, rows = repo_turn_search.matching_turns(
            session, run_id=run_id, filters=filters, offset=offset, limit=limit
        )
        items = [
            TurnMatch(
                turn_id=turn.id,
                external_id=external_id,
                difficulty=difficulty,
                sample_index=turn.sample_index,
                turn_index=turn.turn_index,
                public_verdicts=turn.public_verdicts,
                public_passed=turn.public_passed,
                hidden_verdicts=turn.hidden_verdicts,
                hidden_passed=turn.hidden_passed,
                reward=None
                if reward is None
                else TurnRewardPublic.model_validate(reward, from_attributes=True),
            )
            for turn, external_id, difficulty, reward in rows
        ]
    return TurnMatchesPage(run_id=run_id, items=items, total=total, offset=offset)


def turn_tests(sessions: sessionmaker[Session], run_id: int, turn_id: int) -> TurnTests:
    """Every test of one turn: input, expected, the program's output and error.

    Raises:
        NotFound: no such run, or the turn is not one of its turns.
    """
    with sessions() as session:
        repo_runs.get_run(session, run_id=run_id)
        turn, problem = repo_turn_search.turn_of_run(session, run_id=run_id, turn_id=turn_id)
        public: Sequence[str] | None = turn.public_verdicts if turn.code is not None else None
        return TurnTests(
            turn_id=turn.id,
            run_id=run_id,
            external_id=problem.external_id,
            sample_index=turn.sample_index,
            turn_index=turn.turn_index,
            public=shown_tests("public", problem.public_tests, public, turn.public_outputs),
            hidden=shown_tests(
                "hidden", problem.hidden_tests, turn.hidden_verdicts, turn.hidden_outputs
            ),
        )
