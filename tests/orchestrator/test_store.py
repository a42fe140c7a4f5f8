"""The schema and data access on real PostgreSQL and SQLite."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import Engine, inspect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_datasets
from cobalt.orchestrator.store.models import Base


def test_migrations_build_exactly_the_models(engine: Engine) -> None:
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    assert {"datasets", "problems", "alembic_version"} <= set(inspect(engine).get_table_names())


def _row(external_id: str, statement: str = "Print the sum.") -> dict[str, object]:
    return {
        "external_id": external_id,
        "statement": statement,
        "starter_code": "",
        "test_style": "stdin",
        "fn_name": None,
        "public_tests": [{"stdin": "1 2", "expected_stdout": "3"}],
        "hidden_tests": [{"stdin": "2 2", "expected_stdout": "4"}],
        "difficulty": "easy",
        "source_metadata": {"platform": "test"},
    }


def test_insert_is_idempotent_by_external_id(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="toy", source="jsonl")
        assert (
            repo_datasets.insert_problems(
                session, dataset_id=dataset.id, rows=[_row("a"), _row("b")]
            )
            == 2
        )
    with sessions.begin() as session:
        dataset = repo_datasets.get_dataset(session, name="toy")
        assert dataset is not None
        again = [_row("a", "changed"), _row("c")]
        assert repo_datasets.insert_problems(session, dataset_id=dataset.id, rows=again) == 1
        assert repo_datasets.count_problems(session, dataset_id=dataset.id) == 3
        kept = repo_datasets.get_problem(session, dataset_id=dataset.id, external_id="a")
        assert kept is not None and kept.statement == "Print the sum."  # not overwritten
        assert kept.public_tests == [{"stdin": "1 2", "expected_stdout": "3"}]
        listed = repo_datasets.list_datasets(session)
        assert [(d.name, n) for d, n in listed] == [("toy", 3)]
        ids = [
            p.external_id
            for p in repo_datasets.iter_problems(session, dataset_id=dataset.id, batch=2)
        ]
        assert ids == ["a", "b", "c"]


def test_dataset_names_are_unique(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        repo_datasets.create_dataset(session, name="toy", source="jsonl")
    with pytest.raises(IntegrityError), sessions.begin() as session:
        repo_datasets.create_dataset(session, name="toy", source="taco")


def test_deleting_a_dataset_deletes_its_problems(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="toy", source="jsonl")
        repo_datasets.insert_problems(session, dataset_id=dataset.id, rows=[_row("a")])
    with sessions.begin() as session:
        dataset = repo_datasets.get_dataset(session, name="toy")
        session.delete(dataset)
    with sessions.begin() as session:
        assert repo_datasets.list_datasets(session) == []
