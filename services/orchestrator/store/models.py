"""The database schema (SQLAlchemy 2 typed models). Alembic migrations are made from it.

problem -> trajectory -> turn -> execution: later tables hang off `problems.id`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

__all__ = ["Base", "Dataset", "Problem"]

# Plain JSON (text kept as written), not JSONB: JSONB re-orders object keys, and a test's
# dict argument must reach the program in the order the dataset gave it.
JsonValue = JSON()

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class Dataset(Base):
    """A named set of problems imported from one source (or derived from another)."""

    __tablename__ = "datasets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    source: Mapped[str] = mapped_column(String(50))
    """Importer format (taco-cobalt, taco, lcb, humaneval, jsonl) or `perturb`."""
    variant: Mapped[str] = mapped_column(String(50), default="original")
    """`original`, or `perturbed` for datasets made by `cobalt data perturb`."""
    parent_id: Mapped[int | None] = mapped_column(
        ForeignKey("datasets.id", ondelete="SET NULL"), default=None
    )
    provenance: Mapped[dict[str, Any]] = mapped_column(JsonValue, default=dict)
    """Where the rows came from: file, its sha256, importer options, seed, counts."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    parent: Mapped[Dataset | None] = relationship(remote_side=[id])
    problems: Mapped[list[Problem]] = relationship(
        back_populates="dataset", cascade="all, delete-orphan", passive_deletes=True
    )


class Problem(Base):
    """One programming problem with its public (feedback) and hidden (reward) tests."""

    __tablename__ = "problems"
    __table_args__ = (UniqueConstraint("dataset_id", "external_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    dataset_id: Mapped[int] = mapped_column(
        ForeignKey("datasets.id", ondelete="CASCADE"), index=True
    )
    external_id: Mapped[str] = mapped_column(String(300))
    statement: Mapped[str] = mapped_column(Text)
    starter_code: Mapped[str] = mapped_column(Text, default="")
    test_style: Mapped[str] = mapped_column(String(10))
    fn_name: Mapped[str | None] = mapped_column(String(200), default=None)
    public_tests: Mapped[list[dict[str, Any]]] = mapped_column(JsonValue, default=list)
    hidden_tests: Mapped[list[dict[str, Any]]] = mapped_column(JsonValue, default=list)
    difficulty: Mapped[str | None] = mapped_column(String(50), default=None)
    source_metadata: Mapped[dict[str, Any]] = mapped_column(JsonValue, default=dict)
    perturbation: Mapped[dict[str, Any] | None] = mapped_column(JsonValue, default=None)
    """For perturbed datasets: which public tests had their outputs swapped."""
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    dataset: Mapped[Dataset] = relationship(back_populates="problems")
