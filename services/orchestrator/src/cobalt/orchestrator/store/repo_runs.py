"""Data access for rollout runs, their trajectories and turns. Callers own the transaction.

Workers write turns as `TurnRow`s through `insert_turns`, whose `INSERT ... ON CONFLICT
DO NOTHING` on the turn key (run, problem, sample, turn) makes a retried job harmless: the
turns it already wrote are skipped, and it resumes from `turns_of_trajectory`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, Integer, Table, case, func, literal, select, tuple_, update
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session

from cobalt.orchestrator.lifecycle import (
    TRAJECTORY_TRANSITIONS,
    TrajectoryEvent,
    is_run_move,
    is_trajectory_move,
)
from cobalt.orchestrator.store.db import conflict_insert
from cobalt.orchestrator.store.models import (
    Problem,
    Run,
    RunKind,
    RunStatus,
    Trajectory,
    TrajectoryStatus,
    Turn,
)
from cobalt.orchestrator.store.packed import (
    PackedFloat64List,
    PackedInt32List,
    pack_float64,
    pack_int32,
)
from cobalt.shared.errors import Conflict, InvalidInput, NotFound

__all__ = [
    "PARENT_KIND",
    "RunProgress",
    "TurnRow",
    "completion_tokens",
    "failed_trajectories",
    "first_turns",
    "open_problem_ids",
    "open_problems_of_active_runs",
    "turns_of_run",
    "problem_ids_of_turns",
    "problems_with_trajectories",
    "problems_with_turns",
    "trajectories_of",
    "turns_without_hidden_results",
    "turn_outcomes",
    "turn_rows_of_problem",
    "turns_of_problem",
    "create_run",
    "add_sample_trajectories",
    "ensure_trajectories",
    "get_run",
    "judged_turns",
    "insert_turns",
    "list_runs",
    "mark_trajectory",
    "move_trajectories",
    "record_hidden_results",
    "run_progress",
    "runs_progress",
    "run_status",
    "set_run_status",
    "trajectory_ids_of_problem",
    "turns_of_trajectory",
]

TERMINAL_RUN_STATUSES = frozenset({RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED})
"""Statuses after which a run gets its `finished_at`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRow:
    """One turn as a worker hands it to `insert_turns`: the `turns` columns it knows.

    A plain dataclass rather than a pydantic model: workers build thousands per second
    from values that are already typed (`Sample`, executor verdicts), so validation would
    cost time and catch nothing. `trajectory_id` is absent on purpose; `insert_turns`
    looks it up from the key so it always agrees with it.
    """

    run_id: int
    problem_id: int
    sample_index: int
    turn_index: int
    messages: list[dict[str, Any]]
    """Turn 0's prompt; [] for later turns (see `Turn.messages`)."""
    raw_response: str
    stored_response: str
    code: str | None
    public_verdicts: list[str]
    public_passed: bool
    feedback: str
    model: str
    finish_reason: str | None = None
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    completion_logprobs: list[float] | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_latency_ms: float = 0.0
    exec_latency_ms: float = 0.0
    policy_version: int | None = None
    public_outputs: list[dict[str, Any]] | None = None
    """Per public test, the program's outputs (`rollouts.program_outputs.stored_outputs`)."""

    @property
    def trajectory_key(self) -> tuple[int, int, int]:
        return (self.run_id, self.problem_id, self.sample_index)


_TURN_FIELDS = tuple(f.name for f in fields(TurnRow))
_JSON_FIELDS = tuple(name for name in _TURN_FIELDS if isinstance(Turn.__table__.c[name].type, JSON))
_PACKED_FIELDS = {
    name: packer
    for name in _TURN_FIELDS
    for column_type, packer in ((PackedInt32List, pack_int32), (PackedFloat64List, pack_float64))
    if isinstance(Turn.__table__.c[name].type, column_type)
}
TURN_KEY = ["run_id", "problem_id", "sample_index", "turn_index"]
"""The idempotency key of a turn: its unique constraint."""


@dataclass(frozen=True, slots=True)
class RunProgress:
    """How far a run has got: trajectories by status and turns written."""

    run_id: int
    status: str
    total_trajectories: int
    trajectories: dict[str, int] = field(default_factory=dict)
    """Count per `TrajectoryStatus`, every status present (0 when none)."""
    turns: int = 0
    policy_versions: tuple[int, ...] = ()
    """The trainer's weights versions that wrote its turns, sorted (none: not Cobalt's
    inference service); what tells a run before training from one after."""


def _table(model: type[Trajectory] | type[Turn]) -> Table:
    table = model.__table__
    assert isinstance(table, Table)
    return table


def _now() -> datetime:
    return datetime.now(UTC)


def judged_turns(session: Session, *, run_id: int, problems: Mapping[int, Problem]) -> list[Turn]:
    """Every turn of run `run_id`, by problem, sample and turn index, when each one whose
    problem (in `problems`, by id) has hidden tests has its hidden-test result.

    Raises:
        InvalidInput: some turns have no hidden-test result yet (the message names the
            command that measures them).
    """
    turns = list(
        session.scalars(
            select(Turn)
            .where(Turn.run_id == run_id)
            .order_by(Turn.problem_id, Turn.sample_index, Turn.turn_index)
        )
    )
    unevaluated = sum(
        1 for t in turns if t.hidden_passed is None and problems[t.problem_id].hidden_tests
    )
    if unevaluated:
        raise InvalidInput(
            f"run {run_id} has {unevaluated} turns without hidden-test results; run "
            f"`cobalt run evaluate {run_id}` first"
        )
    return turns


def get_run(session: Session, *, run_id: int, lock: bool = False) -> Run:
    """The run `run_id`; with `lock`, its row is locked until the transaction ends and the
    status read is the latest committed one.

    Lock before deciding a status change on what the run is now: two jobs of a run can end
    together, and without the lock both see "running" and the second one's move fails.
    A no-op UPDATE takes the lock on both stores (SQLite ignores SELECT ... FOR UPDATE but
    grants one writer at a time).

    Raises:
        NotFound: there is no such run.
    """
    if lock:
        session.execute(update(Run).where(Run.id == run_id).values(id=Run.id))
        run = session.get(Run, run_id, populate_existing=True)
    else:
        run = session.get(Run, run_id)
    if run is None:
        raise NotFound(
            f"run {run_id} does not exist; list the runs to find the id you meant",
            detail={"run_id": run_id},
        )
    return run


def run_status(session: Session, *, run_id: int) -> str:
    """The status of run `run_id`, read without loading the run (a job asks every turn).

    Raises:
        NotFound: there is no such run.
    """
    status = session.scalar(select(Run.status).where(Run.id == run_id))
    if status is None:
        raise NotFound(f"run {run_id} does not exist", detail={"run_id": run_id})
    return str(status)


def list_runs(session: Session, *, limit: int = 50) -> list[Run]:
    """The `limit` most recent runs, newest first."""
    return list(session.scalars(select(Run).order_by(Run.id.desc()).limit(limit)))


PARENT_KIND: dict[RunKind, RunKind | None] = {
    RunKind.SAMPLE: None,
    RunKind.REFINE: RunKind.SAMPLE,
}
"""The kind of run each kind continues (None: it starts from the problem statement)."""


def create_run(
    session: Session,
    *,
    kind: str,
    dataset_id: int,
    base_url: str,
    model: str,
    params: dict[str, Any],
    template_name: str,
    template_sha256: str,
    total_trajectories: int = 0,
    parent_run_id: int | None = None,
) -> Run:
    """Add a pending run.

    Args:
        kind: a `RunKind`; a refine run needs `parent_run_id`, a sample run must not
            have one.
        params: the decoding and loop settings as given (n, temperature, turns, ...).
        total_trajectories: problems x n, the denominator of progress.

    Raises:
        InvalidInput: unknown kind, or a parent that does not fit the kind.
        NotFound: `parent_run_id` names no run.
    """
    try:
        run_kind = RunKind(kind)
    except ValueError as exc:
        choices = ", ".join(k.value for k in RunKind)
        raise InvalidInput(f"unknown run kind {kind!r}; use one of: {choices}") from exc
    parent_kind = PARENT_KIND[run_kind]
    if parent_kind is None and parent_run_id is not None:
        raise InvalidInput(f"a {run_kind} run starts from the statement; drop parent_run_id")
    if parent_kind is not None:
        if parent_run_id is None:
            raise InvalidInput(
                f"a {run_kind} run needs parent_run_id, the {parent_kind} run it continues"
            )
        parent = get_run(session, run_id=parent_run_id)
        if parent.kind != parent_kind:
            raise InvalidInput(
                f"run {parent_run_id} is a {parent.kind} run; a {run_kind} run starts from a "
                f"{parent_kind} run's turns"
            )
    run = Run(
        kind=run_kind.value,
        status=RunStatus.PENDING.value,
        dataset_id=dataset_id,
        parent_run_id=parent_run_id,
        base_url=base_url,
        model=model,
        params=params,
        template_name=template_name,
        template_sha256=template_sha256,
        total_trajectories=total_trajectories,
    )
    session.add(run)
    session.flush()
    return run


def set_run_status(session: Session, *, run_id: int, status: str, error: str | None = None) -> Run:
    """Move a run to `status`, stamping the times.

    `started_at` is set the first time the run runs (a resumed run keeps it);
    `finished_at` is set on every terminal status and cleared when the run runs again.
    `error` replaces the stored one, so a run that runs again loses its old error.

    Raises:
        InvalidInput: unknown status.
        NotFound: there is no such run.
        Conflict: no lifecycle event moves the run from its status to `status`.
    """
    try:
        new = RunStatus(status)
    except ValueError as exc:
        choices = ", ".join(s.value for s in RunStatus)
        raise InvalidInput(f"unknown run status {status!r}; use one of: {choices}") from exc
    run = get_run(session, run_id=run_id, lock=True)
    if not is_run_move(run.status, new):
        raise Conflict(f"run {run_id} cannot go from {run.status} to {new}")
    run.status = new.value
    run.error = error
    if new is RunStatus.RUNNING:
        run.started_at = run.started_at or _now()
        run.finished_at = None
    elif new in TERMINAL_RUN_STATUSES:
        run.finished_at = _now()
    session.flush()
    return run


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
    table = _table(Trajectory)
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
    table = _table(Trajectory)
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


def _trajectory_ids(
    session: Session, keys: set[tuple[int, int, int]]
) -> dict[tuple[int, int, int], int]:
    """Trajectory id by (run_id, problem_id, sample_index), for the keys that exist."""
    found: dict[tuple[int, int, int], int] = {}
    ordered = sorted(keys)
    # Chunks keep the IN list (3 parameters a key) under SQLite's 32,766 variable limit.
    for start in range(0, len(ordered), 5000):
        chunk = ordered[start : start + 5000]
        key = tuple_(Trajectory.run_id, Trajectory.problem_id, Trajectory.sample_index)
        rows = session.execute(
            select(
                Trajectory.run_id, Trajectory.problem_id, Trajectory.sample_index, Trajectory.id
            ).where(key.in_(chunk))
        )
        found.update({(r, p, s): id_ for r, p, s, id_ in rows})
    return found


def insert_turns(
    session: Session,
    *,
    rows: Sequence[TurnRow],
    trajectory_ids: Mapping[tuple[int, int, int], int] | None = None,
) -> int:
    """Write turns, skipping those whose (run, problem, sample, turn) is already stored.

    One executemany of `INSERT ... ON CONFLICT (run_id, problem_id, sample_index,
    turn_index) DO NOTHING`. Rows already stored are left as they were (first write
    wins), so a retried job changes nothing. The count comes from the executemany's
    rowcount, which counts only the rows really written; counting the table before and
    after would be wrong while another worker writes the same run.

    Args:
        session: The caller's session; the caller commits.
        rows: The turns.
        trajectory_ids: Trajectory id by (run, problem, sample), when the caller already
            knows them (a job reads them once, `trajectory_ids_of_problem`); keys it lacks
            are looked up.

    Returns:
        How many turns were new.

    Raises:
        NotFound: a row's trajectory does not exist (`ensure_trajectories` first).
    """
    if not rows:
        return 0
    ids = dict(trajectory_ids or {})
    unknown = {row.trajectory_key for row in rows} - ids.keys()
    if unknown:
        ids.update(_trajectory_ids(session, unknown))
        missing = sorted(unknown - ids.keys())
        if missing:
            raise NotFound(
                f"{len(missing)} turn rows name trajectories that do not exist, e.g. "
                f"(run, problem, sample) = {missing[0]}; call ensure_trajectories first",
                detail={"missing": missing[:20]},
            )
    values = [
        {name: getattr(row, name) for name in _TURN_FIELDS}
        | {"trajectory_id": ids[row.trajectory_key]}
        for row in rows
    ]
    connection = session.connection()
    if connection.dialect.name != "postgresql":
        statement = conflict_insert(session)(_table(Turn)).on_conflict_do_nothing(
            index_elements=TURN_KEY
        )
        return connection.execute(statement, values).rowcount
    # On PostgreSQL SQLAlchemy would rewrite the executemany into multi-row VALUES
    # statements of ~12,000 placeholders, whose conversion in Python cost more than the
    # insert itself and which report no rowcount. psycopg's own executemany pipelines one
    # prepared statement instead (bench/turn_writes.py: 2x the rows per second); it gets
    # the values already in the form the column types would send.
    for value in values:
        for name in _JSON_FIELDS:
            if value[name] is not None:
                value[name] = json.dumps(value[name])
        for name, pack in _PACKED_FIELDS.items():
            if value[name] is not None:
                value[name] = pack(value[name])
    sql = _postgresql_insert_turns_sql(connection.dialect)
    return connection.exec_driver_sql(sql, values).rowcount


@functools.lru_cache(maxsize=8)
def _postgresql_insert_turns_sql(dialect: Dialect) -> str:
    """The INSERT of `insert_turns` in the driver's paramstyle, compiled once per engine.

    Compiling it per call cost ~1.5 ms, a quarter of writing one turn.
    """
    from sqlalchemy.dialects.postgresql import insert  # only a PostgreSQL store gets here

    statement = insert(_table(Turn)).on_conflict_do_nothing(index_elements=TURN_KEY)
    return str(
        statement.compile(
            dialect=dialect,
            column_keys=[*_TURN_FIELDS, "trajectory_id"],
            for_executemany=True,
        )
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


def turn_rows_of_problem(
    session: Session, *, run_id: int, problem_id: int
) -> dict[int, list[TurnRow]]:
    """Every stored turn of one problem of a run, by sample, in turn order: what a resumed
    job continues from."""
    turns = session.scalars(
        select(Turn)
        .where(Turn.run_id == run_id, Turn.problem_id == problem_id)
        .order_by(Turn.sample_index, Turn.turn_index)
    )
    by_sample: dict[int, list[TurnRow]] = {}
    for turn in turns:
        row = TurnRow(**{name: getattr(turn, name) for name in _TURN_FIELDS})
        by_sample.setdefault(turn.sample_index, []).append(row)
    return by_sample


def trajectories_of(
    session: Session, *, run_id: int, problem_id: int | None = None
) -> list[Trajectory]:
    """The run's trajectories (of one problem, if given), by problem and sample."""
    query = select(Trajectory).where(Trajectory.run_id == run_id)
    if problem_id is not None:
        query = query.where(Trajectory.problem_id == problem_id)
    return list(session.scalars(query.order_by(Trajectory.problem_id, Trajectory.sample_index)))


def first_turns(session: Session, *, run_id: int) -> list[Turn]:
    """The run's turn-0 rows (what a refine run copies)."""
    return list(
        session.scalars(select(Turn).where(Turn.run_id == run_id, Turn.turn_index == 0)).all()
    )


def turns_of_run(session: Session, *, run_id: int) -> list[Turn]:
    """Every turn of the run, in turn-index order."""
    return list(
        session.scalars(select(Turn).where(Turn.run_id == run_id).order_by(Turn.turn_index))
    )


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


def completion_tokens(session: Session, *, run_id: int) -> int:
    """Tokens generated so far in the run."""
    total = session.scalar(select(func.sum(Turn.completion_tokens)).where(Turn.run_id == run_id))
    return int(total or 0)


def problems_with_turns(session: Session, *, run_id: int) -> dict[int, Problem]:
    """The problems the run has turns of, by id."""
    turns = select(Turn.problem_id).where(Turn.run_id == run_id).distinct()
    return {p.id: p for p in session.scalars(select(Problem).where(Problem.id.in_(turns)))}


def problems_with_trajectories(session: Session, *, run_id: int) -> dict[int, Problem]:
    """The problems the run has trajectories of, by id."""
    trajectories = select(Trajectory.problem_id).where(Trajectory.run_id == run_id)
    return {p.id: p for p in session.scalars(select(Problem).where(Problem.id.in_(trajectories)))}


def turns_without_hidden_results(
    session: Session, *, run_id: int
) -> list[tuple[int, int, str | None]]:
    """(turn id, problem id, program) of the run's turns not yet judged on hidden tests,
    by turn id."""
    rows = session.execute(
        select(Turn.id, Turn.problem_id, Turn.code)
        .where(Turn.run_id == run_id, Turn.hidden_passed.is_(None))
        .order_by(Turn.id)
    )
    return [(turn_id, problem_id, code) for turn_id, problem_id, code in rows]


def problem_ids_of_turns(session: Session, *, turn_ids: Iterable[int]) -> list[int]:
    """The problem id of each of `turn_ids` (one entry per turn found)."""
    return list(session.scalars(select(Turn.problem_id).where(Turn.id.in_(set(turn_ids)))))


def failed_trajectories(session: Session, *, run_id: int) -> int:
    """How many of the run's trajectories failed."""
    failed = session.scalar(
        select(func.count(Trajectory.id)).where(
            Trajectory.run_id == run_id, Trajectory.status == TrajectoryStatus.FAILED.value
        )
    )
    return int(failed or 0)


def turn_outcomes(
    session: Session, *, run_id: int
) -> list[tuple[int, int, int, bool, bool | None]]:
    """(problem id, sample, turn index, public passed, hidden passed) of every turn of the
    run, by problem, sample and turn index."""
    rows = session.execute(
        select(
            Turn.problem_id,
            Turn.sample_index,
            Turn.turn_index,
            Turn.public_passed,
            Turn.hidden_passed,
        )
        .where(Turn.run_id == run_id)
        .order_by(Turn.problem_id, Turn.sample_index, Turn.turn_index)
    )
    return [
        (problem, sample, index, public, hidden) for problem, sample, index, public, hidden in rows
    ]


def turns_of_problem(session: Session, *, run_id: int, problem_id: int) -> list[Turn]:
    """Every stored turn of one problem of a run, by sample and turn index."""
    return list(
        session.scalars(
            select(Turn)
            .where(Turn.run_id == run_id, Turn.problem_id == problem_id)
            .order_by(Turn.sample_index, Turn.turn_index)
        )
    )


def turns_of_trajectory(
    session: Session, *, run_id: int, problem_id: int, sample_index: int
) -> list[Turn]:
    """A trajectory's stored turns by turn index: what a resumed job continues from."""
    return list(
        session.scalars(
            select(Turn)
            .where(
                Turn.run_id == run_id,
                Turn.problem_id == problem_id,
                Turn.sample_index == sample_index,
            )
            .order_by(Turn.turn_index)
        )
    )


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
    try:
        new = TrajectoryStatus(status)
    except ValueError as exc:
        choices = ", ".join(s.value for s in TrajectoryStatus)
        raise InvalidInput(f"unknown trajectory status {status!r}; use one of: {choices}") from exc
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
    trajectory.updated_at = _now()
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


def record_hidden_results(
    session: Session,
    *,
    results: Sequence[tuple[int, list[str], bool]],
    outputs: Mapping[int, list[dict[str, Any]]] | None = None,
) -> int:
    """Store evaluation's hidden-test outcome on turns: `(turn_id, verdicts, passed)` each,
    and per test the program's outputs by turn id (`outputs`; a turn absent there keeps
    none, e.g. one without a program).

    One executemany of `UPDATE turns ... WHERE id = ?`. Recording again overwrites, so a
    re-run evaluation just repeats.

    Returns:
        How many turns were updated.

    Raises:
        NotFound: some turn ids do not exist (nothing is written then).
    """
    if not results:
        return 0
    ids = sorted({turn_id for turn_id, _, _ in results})
    existing: set[int] = set()
    for start in range(0, len(ids), 10_000):
        existing.update(
            session.scalars(select(Turn.id).where(Turn.id.in_(ids[start : start + 10_000])))
        )
    missing = [turn_id for turn_id in ids if turn_id not in existing]
    if missing:
        raise NotFound(
            f"{len(missing)} turns do not exist, e.g. turn {missing[0]}",
            detail={"missing": missing[:20]},
        )
    session.execute(
        update(Turn),
        [
            {
                "id": turn_id,
                "hidden_verdicts": list(verdicts),
                "hidden_passed": passed,
                "hidden_outputs": (outputs or {}).get(turn_id),
            }
            for turn_id, verdicts, passed in results
        ],
    )
    return len(results)


def run_progress(session: Session, *, run_id: int) -> RunProgress:
    """Trajectories per status and turns written for a run.

    Raises:
        NotFound: there is no such run.
    """
    return runs_progress(session, runs=[get_run(session, run_id=run_id)])[run_id]


def runs_progress(session: Session, *, runs: Sequence[Run]) -> dict[int, RunProgress]:
    """`run_progress` of many runs in two queries (not two per run), by run id."""
    ids = [run.id for run in runs]
    counts = {run_id: {status.value: 0 for status in TrajectoryStatus} for run_id in ids}
    turns = dict.fromkeys(ids, 0)
    versions: dict[int, set[int]] = {run_id: set() for run_id in ids}
    if ids:
        for run_id, status, count in session.execute(
            select(Trajectory.run_id, Trajectory.status, func.count(Trajectory.id))
            .where(Trajectory.run_id.in_(ids))
            .group_by(Trajectory.run_id, Trajectory.status)
        ):
            counts[run_id][status] = int(count)
        for run_id, version, count in session.execute(
            select(Turn.run_id, Turn.policy_version, func.count(Turn.id))
            .where(Turn.run_id.in_(ids))
            .group_by(Turn.run_id, Turn.policy_version)
        ):
            turns[run_id] += int(count)
            if version is not None:
                versions[run_id].add(int(version))
    return {
        run.id: RunProgress(
            run_id=run.id,
            status=run.status,
            total_trajectories=run.total_trajectories,
            trajectories=counts[run.id],
            turns=turns[run.id],
            policy_versions=tuple(sorted(versions[run.id])),
        )
        for run in runs
    }
