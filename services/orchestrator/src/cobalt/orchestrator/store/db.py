"""Engines, sessions and schema upgrades for the orchestrator's database.

The same Alembic migrations build SQLite (the embedded default) and PostgreSQL
(deployment). Callers own transactions: `with sessions.begin() as session: ...`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

__all__ = [
    "alembic_config",
    "compress_columns_with_lz4",
    "make_engine",
    "make_sessionmaker",
    "upgrade_database",
]

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


def compress_columns_with_lz4(connection: Connection, table: str, columns: Sequence[str]) -> bool:
    """Have PostgreSQL (14+, built with lz4) compress these columns with lz4 (migrations).

    Large turn columns are compressed and TOASTed on every insert; lz4 does that several
    times faster than the default pglz, which measured 1.5x more turn rows per second in
    bench/turn_writes.py. A server without lz4, or SQLite, keeps its default: only speed
    differs.

    Returns:
        Whether lz4 was set.
    """
    if connection.dialect.name != "postgresql":
        return False
    has_lz4 = connection.scalar(
        text(
            "SELECT 'lz4' = ANY(enumvals) FROM pg_settings WHERE name = 'default_toast_compression'"
        )
    )
    if not has_lz4:
        return False
    for column in columns:
        connection.execute(text(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION lz4"))
    return True
