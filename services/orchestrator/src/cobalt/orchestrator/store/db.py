"""Engines, sessions and schema upgrades for the orchestrator's database.

The same Alembic migrations build SQLite (the embedded default) and PostgreSQL
(deployment). Callers own transactions: `with sessions.begin() as session: ...`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Connection, Engine, Table, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

from cobalt.shared.errors import InvalidInput

if TYPE_CHECKING:  # Alembic is imported only when a schema is actually upgraded
    from alembic.config import Config

__all__ = [
    "conflict_insert",
    "alembic_config",
    "check_sqlite_folder",
    "compress_columns_with_lz4",
    "head_revision",
    "make_engine",
    "make_sessionmaker",
    "table_of",
    "upgrade_database",
    "upgrade_if_behind",
]

MIGRATIONS = Path(__file__).parent / "migrations"
_REVISION_FILE = re.compile(r"^(\d{4})_\w+\.py$")


def head_revision() -> str:
    """The newest migration's revision: migrations are numbered 0001, 0002, ... in their
    file names and form one line (tests/orchestrator/test_results.py checks it against
    Alembic's own head), so the newest number is the head."""
    numbers = [
        m.group(1)
        for p in (MIGRATIONS / "versions").iterdir()
        if (m := _REVISION_FILE.match(p.name))
    ]
    return max(numbers)


def check_sqlite_folder(url: str, *, default_url: str | None = None) -> None:
    """Refuse a SQLite file whose folder does not exist (a mistyped path would otherwise
    become a new, empty store); the default location's folder is created.

    Raises:
        InvalidInput: the folder is missing and `url` is not `default_url`.
    """
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    folder = Path(str(parsed.database)).expanduser().parent
    if folder.is_dir() or url == default_url:
        return
    raise InvalidInput(
        f"COBALT_DATABASE_URL names a SQLite file in {folder}, a folder that does not "
        "exist; create it first, or correct the path"
    )


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


def conflict_insert(session: Session) -> Any:
    """The session's dialect's `insert`, the one with `on_conflict_do_nothing`.

    Imported here, when a row is written: `sqlalchemy.dialects.postgresql` loads every
    PostgreSQL driver's module (~40 ms), which a command reading a SQLite store never needs.
    """
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert
    from sqlalchemy.dialects import sqlite

    return sqlite.insert


def table_of(model: type[DeclarativeBase]) -> Table:
    """The `Table` of a mapped class (what a Core `insert` of many rows is built on)."""
    table = model.__table__
    assert isinstance(table, Table)
    return table


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)


def alembic_config(url: str) -> Config:
    """An Alembic configuration for `url` that finds our migrations without an ini file."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade_database(url: str, revision: str = "head") -> None:
    """Bring the schema at `url` up to `revision` (creating it on a new database)."""
    from alembic import command

    make_engine(url).dispose()  # creates the SQLite directory if needed
    command.upgrade(alembic_config(url), revision)


def upgrade_if_behind(url: str, engine: Engine) -> None:
    """Upgrade the schema unless it is at the head already: one query, where importing
    and running Alembic to find nothing to do cost most of a store-reading command's
    start-up."""
    try:
        with engine.connect() as connection:
            current = connection.scalar(text("SELECT version_num FROM alembic_version"))
    except Exception:  # noqa: BLE001 (no table yet, or any reason: Alembic decides)
        current = None
    if current != head_revision():
        upgrade_database(url)


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
