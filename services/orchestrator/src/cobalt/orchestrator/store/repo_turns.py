"""Data access for a run's turns: write them, read them back, and record evaluation's
hidden-test results on them. Callers own the transaction.

Workers write turns as `TurnRow`s through `insert_turns`, whose `INSERT ... ON CONFLICT
DO NOTHING` on the turn key (run, problem, sample, turn) makes a retried job harmless: the
turns it already wrote are skipped, and it resumes from `turns_of_trajectory`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import JSON, func, select, tuple_, update
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session

from cobalt.orchestrator.store.db import conflict_insert, table_of
from cobalt.orchestrator.store.models import (
    Problem,
    Trajectory,
    Turn,
)
from cobalt.orchestrator.store.packed import (
    PackedFloat64List,
    PackedInt32List,
    pack_float64,
    pack_int32,
)
from cobalt.shared.errors import InvalidInput, NotFound

__all__ = [
    "TurnRow",
    "completion_tokens",
    "first_turns",
    "insert_turns",
    "judged_turns",
    "problem_ids_of_turns",
    "problems_with_turns",
    "record_hidden_results",
    "turn_outcomes",
    "turn_rows_of_problem",
    "turns_of_problem",
    "turns_of_run",
    "turns_of_trajectory",
    "turns_without_hidden_results",
]


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
        statement = conflict_insert(session)(table_of(Turn)).on_conflict_do_nothing(
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

    statement = insert(table_of(Turn)).on_conflict_do_nothing(index_elements=TURN_KEY)
    return str(
        statement.compile(
            dialect=dialect,
            column_keys=[*_TURN_FIELDS, "trajectory_id"],
            for_executemany=True,
        )
    )


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


def completion_tokens(session: Session, *, run_id: int) -> int:
    """Tokens generated so far in the run."""
    total = session.scalar(select(func.sum(Turn.completion_tokens)).where(Turn.run_id == run_id))
    return int(total or 0)


def problems_with_turns(session: Session, *, run_id: int) -> dict[int, Problem]:
    """The problems the run has turns of, by id."""
    turns = select(Turn.problem_id).where(Turn.run_id == run_id).distinct()
    return {p.id: p for p in session.scalars(select(Problem).where(Problem.id.in_(turns)))}


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
