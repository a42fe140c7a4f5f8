"""The turn search's queries: a run's turns by verdict, turn, problem, response text and
reward component ranges (`TurnFilters`), a page at a time, and one turn with its problem.

Like every repository module: keyword-only arguments, the caller owns the transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from sqlalchemy import String, cast, func, or_, select
from sqlalchemy.orm import Session
from sqlalchemy.sql.elements import ColumnElement

from cobalt.orchestrator.store.models import Problem, Turn, TurnReward
from cobalt.shared.errors import InvalidInput, NotFound

__all__ = [
    "REWARD_COMPONENTS",
    "TestSet",
    "TurnFilters",
    "matching_turns",
    "turn_of_run",
]

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


def matching_turns(
    session: Session, *, run_id: int, filters: TurnFilters, offset: int, limit: int
) -> tuple[int, list[tuple[Turn, str, str | None, TurnReward | None]]]:
    """How many of the run's turns match `filters`, and the page of them at `offset`
    (turn, problem external id, difficulty, reward or None), by problem, sample and turn."""
    base = (
        select(Turn, Problem.external_id, Problem.difficulty, TurnReward)
        .join(Problem, Problem.id == Turn.problem_id)
        .outerjoin(TurnReward, TurnReward.turn_id == Turn.id)
        .where(Turn.run_id == run_id, *filters.conditions())
    )
    total = session.scalar(select(func.count()).select_from(base.subquery())) or 0
    rows = session.execute(
        base.order_by(Problem.external_id, Turn.sample_index, Turn.turn_index)
        .offset(offset)
        .limit(limit)
    ).all()
    return int(total), [(turn, problem, level, reward) for turn, problem, level, reward in rows]


def turn_of_run(session: Session, *, run_id: int, turn_id: int) -> tuple[Turn, Problem]:
    """One of the run's turns and its problem.

    Raises:
        NotFound: the turn is not one of the run's turns.
    """
    turn = session.get(Turn, turn_id)
    if turn is None or turn.run_id != run_id:
        raise NotFound(f"run {run_id} has no turn {turn_id}")
    return turn, session.get_one(Problem, turn.problem_id)
