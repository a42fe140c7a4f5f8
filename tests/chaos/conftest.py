"""The chaos tests' database: an empty PostgreSQL database of their own, migrated, and
sessions on it directly (not through the fault proxy the deployment reaches it by)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
from tests.support.databases import empty_database


@pytest.fixture
def database(tmp_path: Path) -> Iterator[str]:
    with empty_database("postgresql", tmp_path) as url:
        upgrade_database(url)
        yield url


@pytest.fixture
def store(database: str) -> Iterator[sessionmaker[Session]]:
    """Sessions on the database directly (not through the fault proxy): the truth."""
    engine = make_engine(database)
    yield make_sessionmaker(engine)
    engine.dispose()
