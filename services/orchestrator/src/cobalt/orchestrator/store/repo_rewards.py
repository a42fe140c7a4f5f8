"""The stored Cobalt rewards of a run's turns (`turn_rewards`) and what scoring them reads.

Like every repository module: keyword-only arguments, the caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from cobalt.orchestrator.store.models import Problem, Trajectory, Turn, TurnReward

__all__ = [
    "add_turn_rewards",
    "has_rewards",
    "mean_reward_by_problem",
    "mean_reward_by_turn_index",
    "rewards_of_turns",
    "scored_turn_ids",
    "problem_test_counts",
    "trajectory_ids_of_run",
    "turns_of_trajectories",
]


def trajectory_ids_of_run(session: Session, *, run_id: int) -> list[int]:
    """The run's trajectory ids, ascending."""
    return list(
        session.scalars(
            select(Trajectory.id).where(Trajectory.run_id == run_id).order_by(Trajectory.id)
        )
    )


def turns_of_trajectories(session: Session, *, trajectory_ids: Sequence[int]) -> list[Turn]:
    """The turns of `trajectory_ids`, by trajectory and turn index."""
    return list(
        session.scalars(
            select(Turn)
            .where(Turn.trajectory_id.in_(trajectory_ids))
            .order_by(Turn.trajectory_id, Turn.turn_index)
        )
    )


def scored_turn_ids(session: Session, *, run_id: int, turn_ids: Iterable[int]) -> set[int]:
    """Those of `turn_ids` that have a stored reward."""
    return set(
        session.scalars(
            select(TurnReward.turn_id).where(
                TurnReward.run_id == run_id, TurnReward.turn_id.in_(list(turn_ids))
            )
        )
    )


def problem_test_counts(
    session: Session, *, problem_ids: Iterable[int]
) -> dict[int, tuple[int, int]]:
    """Per problem, its (public, hidden) test counts."""
    return {
        problem_id: (len(public or []), len(hidden or []))
        for problem_id, public, hidden in session.execute(
            select(Problem.id, Problem.public_tests, Problem.hidden_tests).where(
                Problem.id.in_(set(problem_ids))
            )
        )
    }


def add_turn_rewards(session: Session, *, rows: Iterable[dict[str, Any]]) -> None:
    """Store reward rows (`TurnReward`'s columns)."""
    session.add_all(TurnReward(**row) for row in rows)


def mean_reward_by_turn_index(session: Session, *, run_id: int) -> dict[int, float]:
    """The mean stored reward per turn index that has one."""
    return {
        int(index): float(mean)
        for index, mean in session.execute(
            select(TurnReward.turn_index, func.avg(TurnReward.total))
            .where(TurnReward.run_id == run_id)
            .group_by(TurnReward.turn_index)
        )
    }


def mean_reward_by_problem(session: Session, *, run_id: int) -> dict[int, float]:
    """The mean stored reward per problem id that has one."""
    return {
        int(problem_id): float(mean)
        for problem_id, mean in session.execute(
            select(Turn.problem_id, func.avg(TurnReward.total))
            .join(Turn, Turn.id == TurnReward.turn_id)
            .where(TurnReward.run_id == run_id)
            .group_by(Turn.problem_id)
        )
    }


def rewards_of_turns(session: Session, *, turn_ids: Sequence[int]) -> dict[int, TurnReward]:
    """The stored reward rows of `turn_ids`, by turn id."""
    return {
        row.turn_id: row
        for row in session.scalars(select(TurnReward).where(TurnReward.turn_id.in_(turn_ids)))
    }


def has_rewards(session: Session, *, run_id: int) -> bool:
    """Whether any turn of the run has a stored reward."""
    found = session.scalar(select(TurnReward.turn_id).where(TurnReward.run_id == run_id).limit(1))
    return found is not None
