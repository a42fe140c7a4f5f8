"""Helpers shared by the orchestrator tests."""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_datasets

Problems = dict[str, dict[str, Any]]


def stored_problems(sessions: sessionmaker[Session], name: str) -> Problems:
    """A dataset's stored problems by external id, as plain values (fails if missing)."""
    with sessions.begin() as session:
        dataset = repo_datasets.get_dataset(session, name=name)
        assert dataset is not None, f"no dataset {name!r}"
        return {
            p.external_id: {
                "statement": p.statement,
                "starter_code": p.starter_code,
                "test_style": p.test_style,
                "fn_name": p.fn_name,
                "public": p.public_tests,
                "hidden": p.hidden_tests,
                "difficulty": p.difficulty,
                "meta": p.source_metadata,
            }
            for p in repo_datasets.iter_problems(session, dataset_id=dataset.id)
        }
