"""Databases of their own for tests that move the schema up and down."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from sqlalchemy import make_url

ADMIN_URL = os.environ.get(
    "COBALT_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
"""The PostgreSQL server's admin database, where test databases are created and dropped."""


@contextmanager
def empty_database(kind: str, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty database of its own (`kind` "postgresql" or "sqlite"), dropped
    afterwards: no schema, so migrations run on it from the start."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    admin = make_url(ADMIN_URL)
    name = f"cobalt_test_mig_{os.getpid()}_{secrets.token_hex(3)}"
    conninfo = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield admin.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
