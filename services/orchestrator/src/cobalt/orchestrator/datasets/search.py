"""Full-text search over problem statements and model responses: best first on
PostgreSQL (its full-text search, indexed), every word as a substring on SQLite; the
queries are `store/repo_search.py`'s, a hit's snippet is made here.
"""

from __future__ import annotations

import re

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_search
from cobalt.shared.contracts.browse import SearchHit, SearchKind, SearchResults
from cobalt.shared.errors import InvalidInput

__all__ = ["SNIPPET_CHARS", "search", "snippet"]

SNIPPET_CHARS = 240
"""Characters of context a hit shows around the first matching word."""


def _words(query: str) -> list[str]:
    return [w for w in re.findall(r"\w+", query.lower()) if w]


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> str:
    """The part of `text` around the first word of `query` found in it (or its start)."""
    lowered = text.lower()
    positions = [p for p in (lowered.find(w) for w in _words(query)) if p >= 0]
    start = max(0, min(positions) - width // 3) if positions else 0
    piece = " ".join(text[start : start + width].split())
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


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
    words = _words(query)
    items: list[SearchHit] = []
    with sessions() as session:
        method = repo_search.search_method(session)
        if SearchKind.PROBLEMS in kinds and run_id is None:
            rows = repo_search.matching_problems(session, query=query, words=words, limit=limit)
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
            found = repo_search.matching_responses(
                session, query=query, words=words, run_id=run_id, limit=limit
            )
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
                for name, external_id, run, sample, turn, response in found
            ]
    return SearchResults(query=query, method=method, items=items)
