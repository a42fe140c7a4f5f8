"""Data access for datasets and their problems. Callers own the transaction."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Table, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from cobalt.orchestrator.store.models import Dataset, Problem

__all__ = [
    "count_problems",
    "create_dataset",
    "get_dataset",
    "get_problem",
    "insert_problems",
    "iter_problems",
    "list_datasets",
]


def get_dataset(session: Session, *, name: str) -> Dataset | None:
    return session.scalar(select(Dataset).where(Dataset.name == name))


def create_dataset(
    session: Session,
    *,
    name: str,
    source: str,
    variant: str = "original",
    parent_id: int | None = None,
    provenance: dict[str, Any] | None = None,
) -> Dataset:
    dataset = Dataset(
        name=name,
        source=source,
        variant=variant,
        parent_id=parent_id,
        provenance=provenance or {},
    )
    session.add(dataset)
    session.flush()
    return dataset


def list_datasets(session: Session) -> list[tuple[Dataset, int]]:
    """Every dataset with its problem count, by name."""
    counts = (
        select(Problem.dataset_id, func.count(Problem.id).label("n"))
        .group_by(Problem.dataset_id)
        .subquery()
    )
    rows = session.execute(
        select(Dataset, func.coalesce(counts.c.n, 0))
        .outerjoin(counts, counts.c.dataset_id == Dataset.id)
        .order_by(Dataset.name)
    )
    return [(dataset, int(count)) for dataset, count in rows]


def count_problems(session: Session, *, dataset_id: int) -> int:
    return int(
        session.scalar(select(func.count(Problem.id)).where(Problem.dataset_id == dataset_id)) or 0
    )


def insert_problems(session: Session, *, dataset_id: int, rows: Sequence[dict[str, Any]]) -> int:
    """Insert problems, skipping external ids the dataset already has.

    `INSERT ... ON CONFLICT DO NOTHING` on PostgreSQL and SQLite alike, so re-importing a
    file changes nothing. The rows go as an executemany of one Core statement: no ORM
    bookkeeping and no RETURNING, which measured 1.6x faster than a RETURNING multi-row
    insert (bench/import.py); the new rows are counted instead.

    Returns:
        How many rows were new.
    """
    if not rows:
        return 0
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    table = Problem.__table__
    assert isinstance(table, Table)
    statement = insert(table).on_conflict_do_nothing(index_elements=["dataset_id", "external_id"])
    before = count_problems(session, dataset_id=dataset_id)
    session.connection().execute(statement, [{**row, "dataset_id": dataset_id} for row in rows])
    return count_problems(session, dataset_id=dataset_id) - before


def get_problem(session: Session, *, dataset_id: int, external_id: str) -> Problem | None:
    return session.scalar(
        select(Problem).where(Problem.dataset_id == dataset_id, Problem.external_id == external_id)
    )


def iter_problems(session: Session, *, dataset_id: int, batch: int = 1000) -> Iterator[Problem]:
    """A dataset's problems in id order, fetched `batch` at a time."""
    last = 0
    while True:
        chunk = session.scalars(
            select(Problem)
            .where(Problem.dataset_id == dataset_id, Problem.id > last)
            .order_by(Problem.id)
            .limit(batch)
        ).all()
        if not chunk:
            return
        yield from chunk
        last = chunk[-1].id
