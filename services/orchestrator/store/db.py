"""Engines, sessions and schema upgrades for the orchestrator's database.

The same Alembic migrations build SQLite (the embedded default) and PostgreSQL
(deployment). Callers own transactions: `with sessions.begin() as session: ...`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

__all__ = ["alembic_config", "make_engine", "make_sessionmaker", "upgrade_database"]

MIGRATIONS = Path(__file__).parent / "migrations"


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for `url`; SQLite gets foreign keys on and its directory created."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(connection: Any, _record: Any) -> None:
            cursor = connection.cursor()
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True, **kwargs)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def alembic_config(url: str) -> Config:
    """An Alembic configuration for `url` that finds our migrations without an ini file."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade_database(url: str, revision: str = "head") -> None:
    """Bring the schema at `url` up to `revision` (creating it on a new database)."""
    make_engine(url).dispose()  # creates the SQLite directory if needed
    command.upgrade(alembic_config(url), revision)
