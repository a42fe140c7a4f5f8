"""Full-text search's queries: problems by statement and turns by response.

PostgreSQL matches `to_tsvector('english', text) @@ plainto_tsquery('english', query)` and
ranks by `ts_rank`; migration 0009 adds GIN indexes on exactly those expressions, so a
search reads the index instead of parsing every statement and response. SQLite has no such
search here: every word must occur (case-insensitive `LIKE`), newest first.

Like every repository module: keyword-only arguments, the caller owns the transaction.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, and_, func, literal_column, select
from sqlalchemy.orm import Session

from cobalt.orchestrator.store.models import Dataset, Problem, Turn

__all__ = ["matching_problems", "matching_responses", "search_method"]

# The configuration must be a literal for PostgreSQL to match the indexed expression.
_ENGLISH: ColumnElement[Any] = literal_column("'english'::regconfig")


def search_method(session: Session) -> str:
    """How this store searches: "postgresql-fts" or "like"."""
    return "postgresql-fts" if session.get_bind().dialect.name == "postgresql" else "like"


def _like_all(column: Any, words: list[str]) -> ColumnElement[bool]:
    escaped = [w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") for w in words]
    return and_(*(column.ilike(f"%{w}%", escape="\\") for w in escaped))


def _matches(
    session: Session, column: Any, query: str, words: list[str]
) -> tuple[ColumnElement[bool], list[Any]]:
    """The WHERE clause and the ORDER BY keys (best first) of a search on `column`."""
    if search_method(session) == "postgresql-fts":
        vector = func.to_tsvector(_ENGLISH, column)
        tsquery = func.plainto_tsquery(_ENGLISH, query)
        return vector.op("@@")(tsquery), [func.ts_rank(vector, tsquery).desc()]
    return _like_all(column, words), []


def matching_problems(
    session: Session, *, query: str, words: list[str], limit: int
) -> list[tuple[str, str, str]]:
    """(dataset name, external id, statement) of the problems whose statement matches."""
    where, rank = _matches(session, Problem.statement, query, words)
    rows = session.execute(
        select(Dataset.name, Problem.external_id, Problem.statement)
        .join(Dataset, Dataset.id == Problem.dataset_id)
        .where(where)
        .order_by(*rank, Problem.id)
        .limit(limit)
    )
    return [(name, external_id, statement) for name, external_id, statement in rows]


def matching_responses(
    session: Session, *, query: str, words: list[str], run_id: int | None, limit: int
) -> list[tuple[str, str, int, int, int, str]]:
    """(dataset name, external id, run id, sample index, turn index, response) of the turns
    whose response matches, of `run_id` only when given."""
    where, rank = _matches(session, Turn.raw_response, query, words)
    statement = (
        select(
            Dataset.name,
            Problem.external_id,
            Turn.run_id,
            Turn.sample_index,
            Turn.turn_index,
            Turn.raw_response,
        )
        .join(Problem, Problem.id == Turn.problem_id)
        .join(Dataset, Dataset.id == Problem.dataset_id)
        .where(where)
        .order_by(*rank, Turn.id.desc())
        .limit(limit)
    )
    if run_id is not None:
        statement = statement.where(Turn.run_id == run_id)
    return [
        (name, external_id, run, sample, turn, response)
        for name, external_id, run, sample, turn, response in session.execute(statement)
    ]
