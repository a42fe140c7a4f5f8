"""Runs, trajectories and turns on real PostgreSQL and SQLite (`repo_runs`,
`repo_trajectories`, `repo_turns`; migrations 0002-3)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Engine, func, inspect, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.lifecycle import TrajectoryEvent
from cobalt.orchestrator.store import repo_datasets, repo_runs, repo_trajectories, repo_turns
from cobalt.orchestrator.store.db import alembic_config, make_engine, upgrade_database
from cobalt.orchestrator.store.models import Base, Run, Trajectory, Turn
from cobalt.orchestrator.store.repo_turns import TurnRow
from cobalt.shared.contracts.runs import RunParams
from cobalt.shared.errors import Conflict, InvalidInput, NotFound
from tests.support.databases import empty_database

ROLLOUT_TABLES = ("turns", "trajectories", "runs")


def _clear(engine: Engine) -> None:
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            tables = ", ".join((*ROLLOUT_TABLES, "problems", "datasets"))
            conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
        else:
            # Every table, children first, as TRUNCATE ... CASCADE empties on PostgreSQL:
            # rows other test files left (training jobs, bandit datasets, rewards) hold
            # RESTRICT references to runs and problems.
            for table in reversed(Base.metadata.sorted_tables):
                if table.name == "runs":  # refine runs reference their parent: leaves first
                    conn.execute(
                        text(
                            "DELETE FROM runs WHERE parent_run_id IS NOT NULL AND id NOT IN"
                            " (SELECT parent_run_id FROM runs WHERE parent_run_id IS NOT NULL)"
                        )
                    )
                    conn.execute(text("DELETE FROM runs WHERE parent_run_id IS NOT NULL"))
                conn.execute(table.delete())


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    """The shared store, emptied of rollouts and datasets before and after each test."""
    engine = make_engine(store_url)
    _clear(engine)
    yield engine
    _clear(engine)
    engine.dispose()


@pytest.fixture(params=["postgresql", "sqlite"])
def fresh_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of its own, for tests that move the schema up and down."""
    with empty_database(request.param, tmp_path) as url:
        yield url


def _problem(external_id: str) -> dict[str, object]:
    return {
        "external_id": external_id,
        "statement": "Print the sum.",
        "starter_code": "",
        "test_style": "stdin",
        "fn_name": None,
        "public_tests": [{"stdin": "1 2", "expected_stdout": "3"}],
        "hidden_tests": [{"stdin": "2 2", "expected_stdout": "4"}],
        "difficulty": "easy",
        "source_metadata": {},
    }


def _dataset(session: Session, name: str = "toy", problems: int = 2) -> tuple[int, list[int]]:
    dataset = repo_datasets.create_dataset(session, name=name, source="jsonl")
    rows = [_problem(f"p{number}") for number in range(problems)]
    repo_datasets.insert_problems(session, dataset_id=dataset.id, rows=rows)
    ids = [p.id for p in repo_datasets.iter_problems(session, dataset_id=dataset.id)]
    return dataset.id, ids


def _run(session: Session, dataset_id: int, **overrides: Any) -> Run:
    arguments: dict[str, Any] = {
        "kind": "sample",
        "dataset_id": dataset_id,
        "base_url": "http://127.0.0.1:8000/v1",
        "model": "tiny",
        "params": RunParams(n=2, temperature=0.6, top_p=0.95, turns=3),
        "template_name": "cobalt",
        "template_sha256": "ab" * 32,
        "total_trajectories": 4,
    } | overrides
    return repo_runs.create_run(session, **arguments)


def _turn(run_id: int, problem_id: int, sample_index: int, turn_index: int, **kw: Any) -> TurnRow:
    values: dict[str, Any] = {
        "run_id": run_id,
        "problem_id": problem_id,
        "sample_index": sample_index,
        "turn_index": turn_index,
        "messages": [{"role": "user", "content": f"solve, turn {turn_index}"}],
        "raw_response": f"<think>hm</think>```python\nprint({turn_index})\n```",
        "stored_response": f"```python\nprint({turn_index})\n```",
        "code": f"print({turn_index})",
        "public_verdicts": ["accepted", "wrong_answer"],
        "public_passed": False,
        "feedback": "Test 2 failed.",
        "model": "tiny",
        "finish_reason": "stop",
        "prompt_token_ids": [1, 2, 3],
        "completion_token_ids": [4, 5],
        "completion_logprobs": [-0.125, -1.5e-07],
        "prompt_tokens": 3,
        "completion_tokens": 2,
        "model_latency_ms": 12.5,
        "exec_latency_ms": 3.25,
        "policy_version": 7,
    } | kw
    return TurnRow(**values)


@pytest.fixture
def run_with_trajectories(sessions: sessionmaker[Session]) -> tuple[int, list[int]]:
    """A sample run with trajectories (problem, sample) for 2 problems x 2 samples."""
    with sessions.begin() as session:
        dataset_id, problems = _dataset(session)
        run = _run(session, dataset_id)
        keys = [(p, s) for p in problems for s in range(2)]
        assert repo_trajectories.ensure_trajectories(session, run_id=run.id, keys=keys) == 4
        return run.id, problems


def test_migration_0002_upgrades_and_downgrades(fresh_url: str) -> None:
    upgrade_database(fresh_url)
    engine = make_engine(fresh_url)
    try:
        inspector = inspect(engine)
        assert {"runs", "trajectories", "turns"} <= set(inspector.get_table_names())
        uniques = {tuple(u["column_names"]) for u in inspector.get_unique_constraints("turns")}
        assert ("run_id", "problem_id", "sample_index", "turn_index") in uniques
        assert "ix_runs_status" in {i["name"] for i in inspector.get_indexes("runs")}
        if engine.dialect.name == "postgresql":
            with engine.connect() as conn:
                compression = dict(
                    conn.execute(
                        text(
                            "SELECT attname, attcompression FROM pg_attribute"
                            " WHERE attrelid = 'turns'::regclass AND attnum > 0"
                        )
                    ).all()
                )
            assert compression["raw_response"] == compression["completion_logprobs"] == "l"
            assert compression["feedback"] == ""  # small columns keep the default

        command.downgrade(alembic_config(fresh_url), "0001")
        tables = set(inspect(engine).get_table_names())
        assert not {"runs", "trajectories", "turns"} & tables
        assert {"datasets", "problems"} <= tables

        upgrade_database(fresh_url)
        assert {"runs", "trajectories", "turns"} <= set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_every_downgrade_keeps_the_runs_trajectories_and_turns(fresh_url: str) -> None:
    """Each migration, stepped down from head one at a time, keeps every stored row: on
    SQLite a batch migration that copies a parent table (runs) and drops the original
    would cascade to every trajectory and turn. Every future migration is stepped too."""
    upgrade_database(fresh_url)
    engine = make_engine(fresh_url)
    try:
        with Session(engine) as session, session.begin():
            dataset_id, problems = _dataset(session)
            run_id = _run(session, dataset_id).id
            keys = [(p, 0) for p in problems]
            repo_trajectories.ensure_trajectories(session, run_id=run_id, keys=keys)
            rows = [_turn(run_id, p, 0, turn) for p in problems for turn in range(2)]
            assert repo_turns.insert_turns(session, rows=rows) == 4

        def counts() -> tuple[int, ...]:
            with engine.connect() as conn:
                return tuple(
                    conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
                    for table in ("runs", "trajectories", "turns")
                )

        assert counts() == (1, 2, 4)
        config = alembic_config(fresh_url)
        with engine.connect() as conn:
            head = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
        for revision in range(int(head) - 1, 2, -1):  # down to 0003, which has turns
            command.downgrade(config, f"{revision:04d}")
            assert counts() == (1, 2, 4), f"rows lost stepping down to {revision:04d}"
    finally:
        engine.dispose()


def test_migration_0003_packs_stored_token_arrays_and_unpacks_them_on_downgrade(
    fresh_url: str,
) -> None:
    ids, logprobs = [0, 151_643, 2**31 - 1], [-0.125, -1.5e-07, -1e-300, -9999.0]
    upgrade_database(fresh_url, "0002")
    engine = make_engine(fresh_url)
    try:
        # Rows as 0002 stored them: token arrays as JSON text.
        with Session(engine) as session, session.begin():
            dataset_id, problems = _dataset(session, problems=1)
            # The run as SQL: the ORM model has columns later migrations add.
            run_id = session.execute(
                text(
                    "INSERT INTO runs (kind, status, dataset_id, base_url, model, params,"
                    " template_name, template_sha256, total_trajectories)"
                    " VALUES ('sample', 'pending', :dataset, 'http://127.0.0.1:8000/v1',"
                    " 'tiny', '{}', 'cobalt', :sha, 1) RETURNING id"
                ),
                {"dataset": dataset_id, "sha": "ab" * 32},
            ).scalar_one()
            repo_trajectories.ensure_trajectories(session, run_id=run_id, keys=[(problems[0], 0)])
            trajectory_id = session.scalar(select(Trajectory.id))
        with engine.begin() as conn:
            for turn_index, arrays in ((0, (ids, ids[:1], logprobs)), (1, (None, None, None))):
                conn.execute(
                    text(
                        "INSERT INTO turns (trajectory_id, run_id, problem_id, sample_index,"
                        " turn_index, messages, raw_response, stored_response, public_verdicts,"
                        " public_passed, feedback, prompt_token_ids, completion_token_ids,"
                        " completion_logprobs, prompt_tokens, completion_tokens,"
                        " model_latency_ms, exec_latency_ms, model)"
                        " VALUES (:trajectory, :run, :problem, 0, :turn, '[]', 'r', 's', '[]',"
                        " false, '', :p, :c, :l, 0, 0, 0, 0, 'm')"
                    ),
                    {
                        "trajectory": trajectory_id,
                        "run": run_id,
                        "problem": problems[0],
                        "turn": turn_index,
                        **{
                            key: None if value is None else json.dumps(value)
                            for key, value in zip("pcl", arrays, strict=True)
                        },
                    },
                )

        upgrade_database(fresh_url)
        with Session(engine) as session:
            first, second = session.scalars(select(Turn).order_by(Turn.turn_index)).all()
            assert first.prompt_token_ids == ids and first.completion_token_ids == ids[:1]
            assert first.completion_logprobs == logprobs  # exact
            assert second.prompt_token_ids is second.completion_logprobs is None
            raw = session.execute(text("SELECT prompt_token_ids FROM turns WHERE turn_index = 0"))
            assert bytes(raw.scalar_one()) == b"".join(i.to_bytes(4, "little") for i in ids)

        command.downgrade(alembic_config(fresh_url), "0002")
        with engine.connect() as conn:
            rows = conn.execute(
                text("SELECT prompt_token_ids, completion_logprobs FROM turns ORDER BY turn_index")
            ).all()
        decoded = [
            [None if v is None else json.loads(v) if isinstance(v, str) else v for v in row]
            for row in rows
        ]
        assert decoded[0] == [ids, logprobs]
        assert decoded[1] == [None, None]
    finally:
        engine.dispose()


def test_create_list_and_get_runs(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        dataset_id, _ = _dataset(session)
        first = _run(session, dataset_id)
        second = _run(session, dataset_id, kind="refine", parent_run_id=first.id)
    with sessions.begin() as session:
        assert [r.id for r in repo_runs.list_runs(session)] == [second.id, first.id]
        assert [r.id for r in repo_runs.list_runs(session, limit=1)] == [second.id]
        stored = repo_runs.get_run(session, run_id=first.id)
        assert (stored.kind, stored.status, stored.parent_run_id) == ("sample", "pending", None)
        assert stored.params == RunParams(n=2, temperature=0.6, top_p=0.95, turns=3)
        assert stored.created_at is not None and stored.started_at is None
        assert repo_runs.get_run(session, run_id=second.id).parent_run_id == first.id


def test_create_run_refuses_inconsistent_kinds(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        dataset_id, _ = _dataset(session)
        sample = _run(session, dataset_id)
        refine = _run(session, dataset_id, kind="refine", parent_run_id=sample.id)
        with pytest.raises(InvalidInput, match="unknown run kind"):
            _run(session, dataset_id, kind="sampling")
        with pytest.raises(InvalidInput, match="needs parent_run_id"):
            _run(session, dataset_id, kind="refine")
        with pytest.raises(InvalidInput, match="drop parent_run_id"):
            _run(session, dataset_id, parent_run_id=sample.id)
        with pytest.raises(InvalidInput, match="starts from a sample run"):
            _run(session, dataset_id, kind="refine", parent_run_id=refine.id)
        with pytest.raises(NotFound, match="run 999999 does not exist"):
            _run(session, dataset_id, kind="refine", parent_run_id=999_999)


def test_run_status_stamps_times(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        dataset_id, _ = _dataset(session)
        run_id = _run(session, dataset_id).id
    with sessions.begin() as session:
        repo_runs.set_run_status(session, run_id=run_id, status="running")
    with sessions.begin() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        assert run.status == "running" and run.started_at is not None
        assert run.finished_at is None
        started = run.started_at
    with sessions.begin() as session:
        repo_runs.set_run_status(session, run_id=run_id, status="failed", error="endpoint down")
    with sessions.begin() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        assert (run.status, run.error) == ("failed", "endpoint down")
        assert run.finished_at is not None and run.started_at == started
    with sessions.begin() as session:  # resumed: keeps its first start, loses the error
        repo_runs.set_run_status(session, run_id=run_id, status="pending")
        repo_runs.set_run_status(session, run_id=run_id, status="running")
    with sessions.begin() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        assert (run.status, run.error, run.finished_at) == ("running", None, None)
        assert run.started_at == started
        with pytest.raises(InvalidInput, match="unknown run status 'done'"):
            repo_runs.set_run_status(session, run_id=run_id, status="done")


def test_missing_run_is_not_found(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        with pytest.raises(NotFound, match="run 4242 does not exist") as caught:
            repo_runs.get_run(session, run_id=4242)
        assert caught.value.detail == {"run_id": 4242}
        with pytest.raises(NotFound, match="run 4242"):
            repo_runs.set_run_status(session, run_id=4242, status="running")
        with pytest.raises(NotFound, match="run 4242"):
            repo_runs.run_progress(session, run_id=4242)


def test_ensure_trajectories_is_idempotent(
    sessions: sessionmaker[Session], run_with_trajectories: tuple[int, list[int]]
) -> None:
    run_id, problems = run_with_trajectories
    with sessions.begin() as session:
        keys = [(problems[0], 0), (problems[0], 2)]
        assert repo_trajectories.ensure_trajectories(session, run_id=run_id, keys=keys) == 1
        assert repo_trajectories.ensure_trajectories(session, run_id=run_id, keys=[]) == 0
    with sessions.begin() as session:
        progress = repo_runs.run_progress(session, run_id=run_id)
        assert progress.trajectories == {"pending": 5, "running": 0, "finished": 0, "failed": 0}


def test_inserting_the_same_turns_twice_writes_them_once(
    sessions: sessionmaker[Session], run_with_trajectories: tuple[int, list[int]]
) -> None:
    run_id, (p0, p1) = run_with_trajectories
    first = [_turn(run_id, p0, 0, 0), _turn(run_id, p0, 0, 1), _turn(run_id, p1, 1, 0)]
    with sessions.begin() as session:
        assert repo_turns.insert_turns(session, rows=first) == 3
    retried = [
        _turn(run_id, p0, 0, 0, raw_response="a different answer"),
        _turn(run_id, p0, 0, 1),
        _turn(run_id, p0, 0, 2),
    ]
    with sessions.begin() as session:
        assert repo_turns.insert_turns(session, rows=retried) == 1
        assert repo_turns.insert_turns(session, rows=retried) == 0
        assert repo_turns.insert_turns(session, rows=[]) == 0
    with sessions.begin() as session:
        assert session.scalar(select(func.count(Turn.id))) == 4
        assert repo_runs.run_progress(session, run_id=run_id).turns == 4
        turn0 = repo_turns.turns_of_trajectory(
            session, run_id=run_id, problem_id=p0, sample_index=0
        )
        assert turn0[0].raw_response.startswith("<think>")  # the first write wins
        trajectory = session.scalar(
            select(Trajectory).where(
                Trajectory.run_id == run_id,
                Trajectory.problem_id == p0,
                Trajectory.sample_index == 0,
            )
        )
        assert trajectory is not None
        assert {t.trajectory_id for t in turn0} == {trajectory.id}


def test_turn_columns_round_trip(
    sessions: sessionmaker[Session], run_with_trajectories: tuple[int, list[int]]
) -> None:
    run_id, (p0, _) = run_with_trajectories
    row = _turn(run_id, p0, 1, 0, code=None, prompt_token_ids=None, policy_version=None)
    with sessions.begin() as session:
        repo_turns.insert_turns(session, rows=[row])
    with sessions.begin() as session:
        (turn,) = repo_turns.turns_of_trajectory(
            session, run_id=run_id, problem_id=p0, sample_index=1
        )
        for name in (
            "messages",
            "raw_response",
            "stored_response",
            "code",
            "public_verdicts",
            "public_passed",
            "feedback",
            "finish_reason",
            "prompt_token_ids",
            "completion_token_ids",
            "completion_logprobs",
            "prompt_tokens",
            "completion_tokens",
            "model_latency_ms",
            "exec_latency_ms",
            "model",
            "policy_version",
        ):
            assert getattr(turn, name) == getattr(row, name), name
        assert turn.hidden_verdicts is None and turn.hidden_passed is None
        assert turn.created_at is not None
        # None is SQL NULL, not the JSON value null, so IS NULL finds unscored turns.
        unset = select(func.count(Turn.id)).where(
            Turn.prompt_token_ids.is_(None), Turn.hidden_verdicts.is_(None)
        )
        assert session.scalar(unset) == 1


def test_turns_for_a_missing_trajectory_are_refused(
    sessions: sessionmaker[Session], run_with_trajectories: tuple[int, list[int]]
) -> None:
    run_id, (p0, _) = run_with_trajectories
    with sessions.begin() as session:
        rows = [_turn(run_id, p0, 0, 0), _turn(run_id, p0, 9, 0)]
        with pytest.raises(NotFound, match=r"ensure_trajectories first") as caught:
            repo_turns.insert_turns(session, rows=rows)
        assert caught.value.detail == {"missing": [(run_id, p0, 9)]}
        assert session.scalar(select(func.count(Turn.id))) == 0


def test_concurrent_duplicate_inserts_write_one_row(
    sessions: sessionmaker[Session],
    engine: Engine,
    run_with_trajectories: tuple[int, list[int]],
) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("SQLite has one writer at a time; the race needs PostgreSQL")
    run_id, (p0, _) = run_with_trajectories
    rows = [_turn(run_id, p0, 0, 0), _turn(run_id, p0, 0, 1)]
    inserted: list[int] = []
    errors: list[BaseException] = []

    def second_worker() -> None:
        try:
            with sessions.begin() as session:
                inserted.append(repo_turns.insert_turns(session, rows=rows))
        except BaseException as exc:  # surfaced by the assertions below
            errors.append(exc)

    with sessions.begin() as first:
        inserted.append(repo_turns.insert_turns(session=first, rows=rows))
        worker = threading.Thread(target=second_worker)
        worker.start()
        # Commit only once the second insert waits on our uncommitted keys.
        deadline = time.monotonic() + 10
        with engine.connect() as watcher:
            while time.monotonic() < deadline:
                waiting = watcher.scalar(
                    text(
                        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                        " AND wait_event_type = 'Lock'"
                    )
                )
                if waiting:
                    break
                time.sleep(0.02)
            else:
                pytest.fail("the second insert never waited for the first")
    worker.join(timeout=10)
    assert not worker.is_alive() and not errors, errors
    assert inserted == [2, 0]
    with sessions.begin() as session:
        assert session.scalar(select(func.count(Turn.id))) == 2


def test_resume_reads_turns_in_order(
    sessions: sessionmaker[Session], run_with_trajectories: tuple[int, list[int]]
) -> None:
    run_id, (p0, p1) = run_with_trajectories
    with sessions.begin() as session:
        repo_turns.insert_turns(session, rows=[_turn(run_id, p0, 1, 2), _turn(run_id, p1, 1, 0)])
        repo_turns.insert_turns(session, rows=[_turn(run_id, p0, 1, 0), _turn(run_id, p0, 0, 0)])
        repo_turns.insert_turns(session, rows=[_turn(run_id, p0, 1, 1)])
    with sessions.begin() as session:
        turns = repo_turns.turns_of_trajectory(
            session, run_id=run_id, problem_id=p0, sample_index=1
        )
        assert [(t.problem_id, t.sample_index, t.turn_index) for t in turns] == [
            (p0, 1, 0),
            (p0, 1, 1),
            (p0, 1, 2),
        ]
        assert turns[1].stored_response == "```python\nprint(1)\n```"
        empty = repo_turns.turns_of_trajectory(
            session, run_id=run_id, problem_id=p1, sample_index=0
        )
        assert empty == []


def test_mark_trajectory_and_progress(
    sessions: sessionmaker[Session], run_with_trajectories: tuple[int, list[int]]
) -> None:
    run_id, (p0, p1) = run_with_trajectories
    with sessions.begin() as session:
        repo_turns.insert_turns(session, rows=[_turn(run_id, p0, 0, 0), _turn(run_id, p0, 0, 1)])
        for problem, sample in [(p0, 0), (p1, 0), (p1, 1)]:
            repo_trajectories.mark_trajectory(
                session,
                run_id=run_id,
                problem_id=problem,
                sample_index=sample,
                status="running",
                turns_done=0,
            )
        repo_trajectories.mark_trajectory(
            session, run_id=run_id, problem_id=p0, sample_index=0, status="finished", turns_done=2
        )
        repo_trajectories.mark_trajectory(
            session,
            run_id=run_id,
            problem_id=p1,
            sample_index=1,
            status="failed",
            turns_done=0,
            error="sandbox unavailable",
        )
    with sessions.begin() as session:
        progress = repo_runs.run_progress(session, run_id=run_id)
        assert progress.trajectories == {"pending": 1, "running": 1, "finished": 1, "failed": 1}
        assert (progress.turns, progress.total_trajectories, progress.status) == (2, 4, "pending")
        failed = session.scalar(
            select(Trajectory).where(Trajectory.run_id == run_id, Trajectory.status == "failed")
        )
        assert failed is not None and failed.error == "sandbox unavailable"
        assert failed.updated_at is not None
        with pytest.raises(NotFound, match="no trajectory for problem"):
            repo_trajectories.mark_trajectory(
                session,
                run_id=run_id,
                problem_id=p0,
                sample_index=5,
                status="running",
                turns_done=0,
            )
        with pytest.raises(InvalidInput, match="unknown trajectory status"):
            repo_trajectories.mark_trajectory(
                session, run_id=run_id, problem_id=p0, sample_index=0, status="done", turns_done=0
            )


def test_a_trajectory_moves_only_as_the_lifecycle_allows(
    sessions: sessionmaker[Session], run_with_trajectories: tuple[int, list[int]]
) -> None:
    run_id, (p0, _) = run_with_trajectories
    with sessions.begin() as session:
        with pytest.raises(Conflict, match="cannot go from pending to finished"):
            repo_trajectories.mark_trajectory(
                session, run_id=run_id, problem_id=p0, sample_index=0, status="finished",
                turns_done=0,
            )  # fmt: skip
        for status in ("running", "finished"):
            repo_trajectories.mark_trajectory(
                session, run_id=run_id, problem_id=p0, sample_index=0, status=status,
                turns_done=0,
            )  # fmt: skip
        for status in ("running", "pending", "failed"):
            with pytest.raises(Conflict, match=f"cannot go from finished to {status}"):
                repo_trajectories.mark_trajectory(
                    session, run_id=run_id, problem_id=p0, sample_index=0, status=status,
                    turns_done=0,
                )  # fmt: skip
    with sessions() as session:
        progress = repo_runs.run_progress(session, run_id=run_id)
    assert progress.trajectories == {"pending": 3, "running": 0, "finished": 1, "failed": 0}


def test_move_trajectories_moves_only_those_the_event_applies_to(
    sessions: sessionmaker[Session], run_with_trajectories: tuple[int, list[int]]
) -> None:
    """Each event moves only the trajectories in a status it can happen in."""
    run_id, (p0, p1) = run_with_trajectories
    with sessions.begin() as session:

        def move(event: TrajectoryEvent, problem: int | None, error: str | None = None) -> int:
            return repo_trajectories.move_trajectories(
                session, run_id=run_id, problem_id=problem, event=event, error=error
            )

        repo_turns.insert_turns(session, rows=[_turn(run_id, p0, 0, 0)])
        assert move(TrajectoryEvent.START, p0) == 2
        assert move(TrajectoryEvent.FINISH, p0) == 2
        # A job carried out again finds them finished: no event moves them.
        assert [move(event, p0, "late") for event in TrajectoryEvent] == [0] * 4
        # The other problem is pending: FINISH does not apply to it, START does.
        assert move(TrajectoryEvent.FINISH, p1) == 0
        assert move(TrajectoryEvent.START, p1) == 2
        assert move(TrajectoryEvent.FAIL, p1, "boom") == 2
        # Resume reopens the failed ones of the whole run, not the finished ones.
        assert move(TrajectoryEvent.REOPEN, None) == 2
    with sessions() as session:
        rows = session.execute(
            select(
                Trajectory.problem_id, Trajectory.status, Trajectory.turns_done, Trajectory.error
            )
            .where(Trajectory.run_id == run_id)
            .order_by(Trajectory.problem_id, Trajectory.sample_index)
        ).all()
    assert [tuple(row) for row in rows] == [
        (p0, "finished", 1, None),
        (p0, "finished", 0, None),
        (p1, "pending", 0, None),
        (p1, "pending", 0, None),
    ]


def test_record_hidden_results(
    sessions: sessionmaker[Session], run_with_trajectories: tuple[int, list[int]]
) -> None:
    run_id, (p0, _) = run_with_trajectories
    with sessions.begin() as session:
        rows = [_turn(run_id, p0, 0, index) for index in range(3)]
        repo_turns.insert_turns(session, rows=rows)
        ids = [
            t.id
            for t in repo_turns.turns_of_trajectory(
                session, run_id=run_id, problem_id=p0, sample_index=0
            )
        ]
    with sessions.begin() as session:
        results = [(ids[0], ["accepted", "wrong_answer"], False), (ids[2], ["accepted"], True)]
        assert repo_turns.record_hidden_results(session, results=results) == 2
        assert repo_turns.record_hidden_results(session, results=[]) == 0
    with sessions.begin() as session:
        with pytest.raises(NotFound, match="1 turns do not exist"):
            repo_turns.record_hidden_results(
                session, results=[(ids[1], ["accepted"], True)] + [(10**9, [], False)]
            )
    with sessions.begin() as session:
        turns = repo_turns.turns_of_trajectory(
            session, run_id=run_id, problem_id=p0, sample_index=0
        )
        assert [(t.hidden_verdicts, t.hidden_passed) for t in turns] == [
            (["accepted", "wrong_answer"], False),
            (None, None),
            (["accepted"], True),
        ]


def test_deleting_a_run_deletes_its_trajectories_and_turns(
    sessions: sessionmaker[Session], run_with_trajectories: tuple[int, list[int]]
) -> None:
    run_id, (p0, p1) = run_with_trajectories
    with sessions.begin() as session:
        dataset_id = repo_runs.get_run(session, run_id=run_id).dataset_id
        other = _run(session, dataset_id).id
        repo_trajectories.ensure_trajectories(session, run_id=other, keys=[(p0, 0)])
        repo_turns.insert_turns(
            session,
            rows=[_turn(run_id, p0, 0, 0), _turn(run_id, p1, 1, 0), _turn(other, p0, 0, 0)],
        )
    with sessions.begin() as session:
        session.delete(repo_runs.get_run(session, run_id=run_id))
    with sessions.begin() as session:
        assert session.scalar(select(func.count(Run.id))) == 1
        assert session.scalars(select(Trajectory.run_id)).all() == [other]
        assert session.scalars(select(Turn.run_id)).all() == [other]


def test_runs_protect_their_dataset_and_parent(
    sessions: sessionmaker[Session], run_with_trajectories: tuple[int, list[int]]
) -> None:
    run_id, _ = run_with_trajectories
    with sessions.begin() as session:
        dataset_id = repo_runs.get_run(session, run_id=run_id).dataset_id
        _run(session, dataset_id, kind="refine", parent_run_id=run_id)
    with pytest.raises(IntegrityError), sessions.begin() as session:
        session.execute(text("DELETE FROM datasets WHERE id = :id"), {"id": dataset_id})
    with pytest.raises(IntegrityError), sessions.begin() as session:
        session.execute(text("DELETE FROM runs WHERE id = :id"), {"id": run_id})
    with sessions.begin() as session:
        assert session.scalar(select(func.count(Run.id))) == 2


def test_the_last_jobs_of_a_run_ending_together_finish_it_once(
    sessions: sessionmaker[Session],
    run_with_trajectories: tuple[int, list[int]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two jobs end their problems at once and both ask whether the run is done.

    Each waits (up to 2 s) after reading the run's progress for the other to read it too:
    without the run's row lock both read "running, nothing open" and the second one's
    move ("finished to finished") raised, failing a job whose work was done.
    """
    from cobalt.orchestrator.runs.jobs import finish_run_if_done

    run_id, problems = run_with_trajectories
    with sessions.begin() as session:
        repo_runs.set_run_status(session, run_id=run_id, status="running")
        for problem in problems:
            repo_trajectories.move_trajectories(
                session, run_id=run_id, problem_id=problem, event=TrajectoryEvent.START
            )
            repo_trajectories.move_trajectories(
                session, run_id=run_id, problem_id=problem, event=TrajectoryEvent.FINISH
            )
    both_read = threading.Barrier(2)
    read_progress = repo_runs.run_progress

    def progress_then_wait(session: Session, *, run_id: int) -> Any:
        progress = read_progress(session, run_id=run_id)
        try:
            both_read.wait(timeout=2)
        except threading.BrokenBarrierError:
            pass  # the other job waits on the run's lock (the fix) or already ended it
        return progress

    monkeypatch.setattr(repo_runs, "run_progress", progress_then_wait)
    ended: list[str | None] = []
    errors: list[BaseException] = []

    def job_ends() -> None:
        try:
            ended.append(finish_run_if_done(sessions, run_id))
        except BaseException as exc:  # surfaced by the assertions below
            errors.append(exc)

    jobs = [threading.Thread(target=job_ends) for _ in range(2)]
    for job in jobs:
        job.start()
    for job in jobs:
        job.join(timeout=30)
    assert not errors, errors
    assert sorted(ended, key=lambda status: status is None) == ["finished", None]
    with sessions.begin() as session:
        assert repo_runs.get_run(session, run_id=run_id).status == "finished"
