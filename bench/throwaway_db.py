"""A PostgreSQL database that exists only for one benchmark run (never the user's data).

Created on the server named by COBALT_TEST_POSTGRES_URL (default postgres@127.0.0.1:5432)
and dropped with `drop_database`. Shared by the bench scripts that write to PostgreSQL.
"""

from __future__ import annotations

import os
import secrets

import psycopg
from sqlalchemy.engine import make_url

ADMIN_URL = os.environ.get(
    "COBALT_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


def throwaway_database() -> tuple[str, str, str]:
    """(SQLAlchemy URL, admin conninfo, name) of a new empty database."""
    admin = make_url(ADMIN_URL)
    name = f"cobalt_bench_{os.getpid()}_{secrets.token_hex(3)}"
    conninfo = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return admin.set(database=name).render_as_string(hide_password=False), conninfo, name


def drop_database(conninfo: str, name: str) -> None:
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
