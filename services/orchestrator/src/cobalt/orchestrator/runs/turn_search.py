"""Finding turns in a run: by verdict, turn, problem, response text and reward component
ranges; and one turn's tests with the program's outputs.

The questions a researcher asks of a run's failures ("which turn-2 programs time out?",
"which turns earned an improvement bonus but still fail hidden tests?") are filters over
the stored turns and their rewards; they run in the database, a page at a time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import String, cast, func, or_, select
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.sql.elements import ColumnElement

from cobalt.orchestrator.rollouts.program_outputs import shown_tests
from cobalt.orchestrator.store import repo_runs
from cobalt.orchestrator.store.models import Problem, Turn, TurnReward
from cobalt.shared.contracts.browse import (
    TurnMatch,
    TurnMatchesPage,
    TurnRewardPublic,
    TurnTests,
)
from cobalt.shared.errors import InvalidInput, NotFound

__all__ = ["REWARD_COMPONENTS", "TestSet", "TurnFilters", "find_turns", "turn_tests"]

REWARD_COMPONENTS = (
    "total",
    "total_before_clip",
    "validation_reward",
    "pass_rate",
    "prev_best",
    "correctness",
    "improvement",
    "format",
    "tests_passed",
    "think_tokens",
    "answer_tokens",
)
"""The numeric reward components a range filter may name (columns of `turn_rewards`)."""


class TestSet(StrEnum):
    """Which tests a verdict filter looks at."""

    __test__ = False

    ANY = "any"
    PUBLIC = "public"
    HIDDEN = "hidden"


@dataclass(frozen=True)
class TurnFilters:
    """The filters of `find_turns`; every one left None matches everything.

    Raises:
        InvalidInput: a reward range without a component, an unknown component, or an
            empty range.
    """

    verdict: str | None = None
    tests: TestSet = TestSet.ANY
    turn: int | None = None
    problem: str | None = None
    text: str | None = None
    hidden_passed: bool | None = None
    component: str | None = None
    minimum: float | None = None
    maximum: float | None = None

    def __post_init__(self) -> None:
        ranged = self.minimum is not None or self.maximum is not None
        if ranged and self.component is None:
            raise InvalidInput("a reward range needs a component (e.g. component=total)")
        if self.component is not None and self.component not in REWARD_COMPONENTS:
            raise InvalidInput(
                f"no reward component {self.component!r}; one of {', '.join(REWARD_COMPONENTS)}"
            )
        if self.minimum is not None and self.maximum is not None and self.minimum > self.maximum:
            raise InvalidInput(
                f"the reward range is empty: min {self.minimum} > max {self.maximum}"
            )

    def conditions(self) -> list[ColumnElement[bool]]:
        found: list[ColumnElement[bool]] = []
        if self.verdict:
            # The verdict lists are JSON arrays of strings: match the quoted string in the
            # text, the same on PostgreSQL and SQLite (verdicts hold no quotes).
            pattern = f'%"{self.verdict}"%'
            public = cast(Turn.public_verdicts, String).like(pattern)
            hidden = cast(Turn.hidden_verdicts, String).like(pattern)
            found.append(
                public
                if self.tests == TestSet.PUBLIC
                else hidden
                if self.tests == TestSet.HIDDEN
                else or_(public, hidden)
            )
        if self.turn is not None:
            found.append(Turn.turn_index == self.turn)
        if self.problem:
            found.append(func.lower(Problem.external_id).contains(self.problem.lower()))
        if self.text:
            # A substring of the response (program included), any case; % and _ literal.
            found.append(func.lower(Turn.raw_response).contains(self.text.lower(), autoescape=True))
        if self.hidden_passed is not None:
            found.append(Turn.hidden_passed.is_(self.hidden_passed))
        if self.component is not None:
            column = getattr(TurnReward, self.component)
            found.append(column.is_not(None))
            if self.minimum is not None:
                found.append(column >= self.minimum)
            if self.maximum is not None:
                found.append(column <= self.maximum)
        return found


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
        where = [Turn.run_id == run_id, *filters.conditions()]
        base = (
            select(Turn, Problem.external_id, Problem.difficulty, TurnReward)
            .join(Problem, Problem.id == Turn.problem_id)
            .outerjoin(TurnReward, TurnReward.turn_id == Turn.id)
            .where(*where)
        )
        total = session.scalar(select(func.count()).select_from(base.subquery())) or 0
        rows = session.execute(
            base.order_by(Problem.external_id, Turn.sample_index, Turn.turn_index)
            .offset(offset)
            .limit(limit)
        ).all()
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
    return TurnMatchesPage(run_id=run_id, items=items, total=int(total), offset=offset)


def turn_tests(sessions: sessionmaker[Session], run_id: int, turn_id: int) -> TurnTests:
    """Every test of one turn: input, expected, the program's output and error.

    Raises:
        NotFound: no such run, or the turn is not one of its turns.
    """
    with sessions() as session:
        repo_runs.get_run(session, run_id=run_id)
        turn = session.get(Turn, turn_id)
        if turn is None or turn.run_id != run_id:
            raise NotFound(f"run {run_id} has no turn {turn_id}")
        problem = session.get_one(Problem, turn.problem_id)
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
