"""Data access for a run's trajectories (one sample of one problem): create them (safe to
repeat), find the open ones, and move them through the lifecycle one at a time or a
problem at a time. Callers own the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Integer, case, func, literal, select, update
from sqlalchemy.orm import Session

from cobalt.orchestrator.lifecycle import (
    TRAJECTORY_TRANSITIONS,
    TrajectoryEvent,
    is_trajectory_move,
)
from cobalt.orchestrator.store.db import conflict_insert, table_of
from cobalt.orchestrator.store.errors import parse_choice
from cobalt.orchestrator.store.models import (
    Problem,
    Run,
    RunStatus,
    Trajectory,
    TrajectoryStatus,
    Turn,
)
from cobalt.orchestrator.store.times import utc_now
from cobalt.shared.errors import Conflict, NotFound

__all__ = [
    "add_sample_trajectories",
    "ensure_trajectories",
    "failed_trajectories",
    "mark_trajectory",
    "move_trajectories",
    "open_problem_ids",
    "open_problems_of_active_runs",
    "problems_with_trajectories",
    "trajectories_of",
    "trajectory_ids_of_problem",
]


def ensure_trajectories(session: Session, *, run_id: int, keys: Iterable[tuple[int, int]]) -> int:
    """Create the pending trajectories `(problem_id, sample_index)` of a run that are missing.

    Safe to repeat (`ON CONFLICT DO NOTHING`), so a re-enqueued run or job just calls it.

    Returns:
        How many trajectories were new.
    """
    values = [
        {
            "run_id": run_id,
            "problem_id": problem_id,
            "sample_index": sample_index,
            "status": TrajectoryStatus.PENDING.value,
            "turns_done": 0,
        }
        for problem_id, sample_index in keys
    ]
    if not values:
        return 0
    table = table_of(Trajectory)
    statement = (
        conflict_insert(session)(table)
        .on_conflict_do_nothing(index_elements=["run_id", "problem_id", "sample_index"])
        .returning(table.c.id)
    )
    return len(session.connection().execute(statement, values).all())


def add_sample_trajectories(
    session: Session, *, run_id: int, dataset_id: int, last_problem_id: int, samples: int
) -> None:
    """The pending trajectories of a sample run: `samples` per problem of the dataset up
    to `last_problem_id`, written by the database in one statement; those that exist are
    kept (safe to repeat, so a resume completes an interrupted creation).

    A large run (164 problems x 1024 samples: 168k rows) sent as parameters from here
    took several times as long as generating the rows in the database (a recursive CTE of
    sample indices, cross-joined with the problems), which this does.
    """
    table = table_of(Trajectory)
    indices = select(literal(0, Integer).label("i")).cte("sample_indices", recursive=True)
    indices = indices.union_all(
        select((indices.c.i + 1).label("i")).where(indices.c.i < samples - 1)
    )
    problems = (
        select(Problem.id)
        .where(Problem.dataset_id == dataset_id, Problem.id <= last_problem_id)
        .subquery()
    )
    rows = select(
        literal(run_id, Integer),
        problems.c.id,
        indices.c.i,
        literal(TrajectoryStatus.PENDING.value),
        literal(0, Integer),
    ).select_from(problems.join(indices, literal(True)))
    columns = ["run_id", "problem_id", "sample_index", "status", "turns_done"]
    statement = conflict_insert(session)(table).from_select(columns, rows)
    session.execute(
        statement.on_conflict_do_nothing(index_elements=["run_id", "problem_id", "sample_index"])
    )


def trajectory_ids_of_problem(
    session: Session, *, run_id: int, problem_id: int
) -> dict[tuple[int, int, int], int]:
    """Trajectory id by (run, problem, sample) for every trajectory of one problem."""
    rows = session.execute(
        select(Trajectory.sample_index, Trajectory.id).where(
            Trajectory.run_id == run_id, Trajectory.problem_id == problem_id
        )
    )
    return {(run_id, problem_id, sample_index): id_ for sample_index, id_ in rows}


def trajectories_of(
    session: Session, *, run_id: int, problem_id: int | None = None
) -> list[Trajectory]:
    """The run's trajectories (of one problem, if given), by problem and sample."""
    query = select(Trajectory).where(Trajectory.run_id == run_id)
    if problem_id is not None:
        query = query.where(Trajectory.problem_id == problem_id)
    return list(session.scalars(query.order_by(Trajectory.problem_id, Trajectory.sample_index)))


def open_problem_ids(session: Session, *, run_id: int) -> list[int]:
    """Problems of the run with a trajectory still pending or running, ascending."""
    return list(
        session.scalars(
            select(Trajectory.problem_id)
            .where(
                Trajectory.run_id == run_id,
                Trajectory.status.in_((TrajectoryStatus.PENDING, TrajectoryStatus.RUNNING)),
            )
            .distinct()
            .order_by(Trajectory.problem_id)
        )
    )


def open_problems_of_active_runs(session: Session) -> list[tuple[int, int]]:
    """(run, problem) for every problem with a trajectory still pending or running, of
    every run that is pending or running (the work the queue should hold), ascending."""
    rows = session.execute(
        select(Trajectory.run_id, Trajectory.problem_id)
        .join(Run, Run.id == Trajectory.run_id)
        .where(
            Run.status.in_((RunStatus.PENDING, RunStatus.RUNNING)),
            Trajectory.status.in_((TrajectoryStatus.PENDING, TrajectoryStatus.RUNNING)),
        )
        .distinct()
        .order_by(Trajectory.run_id, Trajectory.problem_id)
    )
    return [(run_id, problem_id) for run_id, problem_id in rows]


def problems_with_trajectories(session: Session, *, run_id: int) -> dict[int, Problem]:
    """The problems the run has trajectories of, by id."""
    trajectories = select(Trajectory.problem_id).where(Trajectory.run_id == run_id)
    return {p.id: p for p in session.scalars(select(Problem).where(Problem.id.in_(trajectories)))}


def failed_trajectories(session: Session, *, run_id: int) -> int:
    """How many of the run's trajectories failed."""
    failed = session.scalar(
        select(func.count(Trajectory.id)).where(
            Trajectory.run_id == run_id, Trajectory.status == TrajectoryStatus.FAILED.value
        )
    )
    return int(failed or 0)


def mark_trajectory(
    session: Session,
    *,
    run_id: int,
    problem_id: int,
    sample_index: int,
    status: str,
    turns_done: int,
    error: str | None = None,
) -> None:
    """Move one trajectory to `status`, with how many turns it has and its error (None
    clears it).

    Raises:
        InvalidInput: unknown status.
        NotFound: there is no such trajectory.
        Conflict: no lifecycle event moves the trajectory from its status to `status`.
    """
    new = parse_choice(TrajectoryStatus, status, "trajectory status")
    trajectory = session.scalar(
        select(Trajectory)
        .where(
            Trajectory.run_id == run_id,
            Trajectory.problem_id == problem_id,
            Trajectory.sample_index == sample_index,
        )
        .with_for_update()
    )
    if trajectory is None:
        raise NotFound(
            f"run {run_id} has no trajectory for problem {problem_id}, sample "
            f"{sample_index}; call ensure_trajectories first",
            detail={"run_id": run_id, "problem_id": problem_id, "sample_index": sample_index},
        )
    if not is_trajectory_move(trajectory.status, new):
        raise Conflict(
            f"trajectory (run {run_id}, problem {problem_id}, sample {sample_index}) cannot "
            f"go from {trajectory.status} to {new}"
        )
    trajectory.status = new.value
    trajectory.turns_done = turns_done
    trajectory.error = error
    trajectory.updated_at = utc_now()
    session.flush()


def move_trajectories(
    session: Session,
    *,
    run_id: int,
    event: TrajectoryEvent,
    problem_id: int | None = None,
    error: str | None = None,
) -> int:
    """Apply `event` to the trajectories of a run (of one problem of it, if given).

    One UPDATE whatever the number of samples. Only trajectories in a status the event
    can happen in move (`lifecycle.TRAJECTORY_TRANSITIONS`); the others keep theirs, so a
    job carried out twice cannot reopen a finished trajectory. `turns_done` is counted
    from the turns table in the same statement, so it is right even for a job that failed
    part-way; `error` replaces the stored one (None clears it).

    Returns:
        How many trajectories moved.
    """
    moves = TRAJECTORY_TRANSITIONS[event]
    turns_done = (
        select(func.count(Turn.id))
        .where(
            Turn.run_id == Trajectory.run_id,
            Turn.problem_id == Trajectory.problem_id,
            Turn.sample_index == Trajectory.sample_index,
        )
        .scalar_subquery()
    )
    which = [Trajectory.run_id == run_id, Trajectory.status.in_([s.value for s in moves])]
    if problem_id is not None:
        which.append(Trajectory.problem_id == problem_id)
    result = session.execute(
        update(Trajectory)
        .where(*which)
        .values(
            status=case({b.value: a.value for b, a in moves.items()}, value=Trajectory.status),
            turns_done=turns_done,
            error=error,
            updated_at=func.now(),
        )
        .execution_options(synchronize_session=False)
    )
    return int(getattr(result, "rowcount", 0) or 0)
