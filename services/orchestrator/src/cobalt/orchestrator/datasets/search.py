"""Full-text search over problem statements and model responses.

PostgreSQL matches `to_tsvector('english', text) @@ plainto_tsquery('english', query)` and
ranks by `ts_rank`; migration 0009 adds GIN indexes on exactly those expressions, so a
search reads the index instead of parsing every statement and response. SQLite has no such
search here: every word of the query must occur (case-insensitive `LIKE`), newest first.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import ColumnElement, and_, func, literal_column, select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store.models import Dataset, Problem, Turn
from cobalt.shared.contracts.browse import SearchHit, SearchKind, SearchResults
from cobalt.shared.errors import InvalidInput

__all__ = ["SNIPPET_CHARS", "search", "snippet"]

SNIPPET_CHARS = 240
"""Characters of context a hit shows around the first matching word."""

# The configuration must be a literal for PostgreSQL to match the indexed expression.
_ENGLISH: ColumnElement[Any] = literal_column("'english'::regconfig")


def _words(query: str) -> list[str]:
    return [w for w in re.findall(r"\w+", query.lower()) if w]


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> str:
    """The part of `text` around the first word of `query` found in it (or its start)."""
    lowered = text.lower()
    positions = [p for p in (lowered.find(w) for w in _words(query)) if p >= 0]
    start = max(0, min(positions) - width // 3) if positions else 0
    piece = " ".join(text[start : start + width].split())
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


def _like_all(column: Any, words: list[str]) -> ColumnElement[bool]:
    escaped = [w.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") for w in words]
    return and_(*(column.ilike(f"%{w}%", escape="\\") for w in escaped))


def _matches(dialect: str, column: Any, query: str) -> tuple[ColumnElement[bool], Any]:
    """The WHERE clause and the ORDER BY key of a search on `column`."""
    if dialect == "postgresql":
        vector = func.to_tsvector(_ENGLISH, column)
        tsquery = func.plainto_tsquery(_ENGLISH, query)
        return vector.op("@@")(tsquery), func.ts_rank(vector, tsquery).desc()
    return _like_all(column, _words(query)), None


def search(
    sessions: sessionmaker[Session],
    *,
    query: str,
    kinds: tuple[SearchKind, ...] = (SearchKind.PROBLEMS, SearchKind.RESPONSES),
    run_id: int | None = None,
    limit: int = 50,
) -> SearchResults:
    """Problems whose statement, and turns whose response, match `query` (best first).

    Raises:
        InvalidInput: the query has no word to search for.
    """
    if not _words(query):
        raise InvalidInput("search needs at least one word")
    items: list[SearchHit] = []
    with sessions() as session:
        dialect = session.get_bind().dialect.name
        if SearchKind.PROBLEMS in kinds and run_id is None:
            where, rank = _matches(dialect, Problem.statement, query)
            rows = session.execute(
                select(Dataset.name, Problem.external_id, Problem.statement)
                .join(Dataset, Dataset.id == Problem.dataset_id)
                .where(where)
                .order_by(*([rank] if rank is not None else []), Problem.id)
                .limit(limit)
            )
            items += [
                SearchHit(
                    kind=SearchKind.PROBLEMS,
                    dataset=name,
                    external_id=external_id,
                    snippet=snippet(statement, query),
                )
                for name, external_id, statement in rows
            ]
        if SearchKind.RESPONSES in kinds:
            where, rank = _matches(dialect, Turn.raw_response, query)
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
                .order_by(*([rank] if rank is not None else []), Turn.id.desc())
                .limit(limit)
            )
            if run_id is not None:
                statement = statement.where(Turn.run_id == run_id)
            items += [
                SearchHit(
                    kind=SearchKind.RESPONSES,
                    dataset=name,
                    external_id=external_id,
                    run_id=run,
                    sample_index=sample,
                    turn_index=turn,
                    snippet=snippet(response, query),
                )
                for name, external_id, run, sample, turn, response in session.execute(statement)
            ]
    method = "postgresql-fts" if dialect == "postgresql" else "like"
    return SearchResults(query=query, method=method, items=items)
