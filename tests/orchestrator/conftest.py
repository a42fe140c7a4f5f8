"""Real databases for store tests: a throwaway PostgreSQL database and a SQLite file.

Each is created once per session and migrated with Alembic (never `create_all`), and
emptied before every test, the way rq's tests flush their Redis database.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
from cobalt.orchestrator.worker.runtime import close_runtime
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.runs import REDIS_URL, TABLES, add_doubles, scripted
from tests.support.serving import serve_asgi
from tests.ui.seed import Seeded, seed

ADMIN_URL = os.environ.get(
    "COBALT_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)


@pytest.fixture(autouse=True)
def fresh_rollout_runtime() -> Iterator[None]:
    """Each test's jobs get their own clients: the servers they talked to are gone after it."""
    yield
    close_runtime()


@pytest.fixture(scope="session")
def postgresql_url() -> Iterator[str]:
    admin = make_url(ADMIN_URL)
    name = f"cobalt_test_{os.getpid()}_{secrets.token_hex(3)}"
    conninfo = admin.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = admin.set(database=name).render_as_string(hide_password=False)
    upgrade_database(url)
    yield url
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    path: Path = tmp_path_factory.mktemp("store") / "cobalt.db"
    url = f"sqlite:///{path}"
    upgrade_database(url)
    return url


@pytest.fixture(params=["postgresql", "sqlite"])
def store_url(request: pytest.FixtureRequest) -> str:
    """Each store test runs on PostgreSQL and on SQLite."""
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
def engine(store_url: str) -> Iterator[Engine]:
    engine = make_engine(store_url)
    with engine.begin() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
        else:
            # Refine runs point at their sample run (RESTRICT): unlink before deleting.
            conn.execute(text("UPDATE runs SET parent_run_id = NULL"))
            for table in TABLES:
                conn.execute(text(f"DELETE FROM {table}"))
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return make_sessionmaker(engine)


@pytest.fixture
def cli_env(store_url: str, executor_url: str) -> dict[str, str]:
    """Environment for `cobalt` subprocesses: the test store and the test executor only."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    return {**env, "COBALT_DATABASE_URL": store_url, "COBALT_EXECUTOR_URL": executor_url}


@pytest.fixture
def fake_model() -> Iterator[tuple[FakeOpenAI, str]]:
    """The deterministic model of tests/support/runs.py, served over HTTP."""
    fake = FakeOpenAI(responder=scripted)
    with serve_fake_openai(fake) as url:
        yield fake, url


@pytest.fixture
def rq_env(postgresql_url: str, executor_url: str) -> Iterator[dict[str, str]]:
    """CLI environment with a queue: an emptied PostgreSQL database and a flushed Redis db."""
    from redis import Redis

    engine = make_engine(postgresql_url)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
    engine.dispose()

    redis = Redis.from_url(REDIS_URL)
    redis.flushdb()
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    yield {
        **env,
        "COBALT_DATABASE_URL": postgresql_url,
        "COBALT_EXECUTOR_URL": executor_url,
        "COBALT_REDIS_URL": REDIS_URL,
    }
    redis.flushdb()
    redis.close()


@pytest.fixture
def pg_sessions(postgresql_url: str) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(postgresql_url)
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def pg_dataset(pg_sessions: sessionmaker[Session], rq_env: dict[str, str]) -> str:
    return add_doubles(pg_sessions)


@pytest.fixture
def seeded(sessions: sessionmaker[Session]) -> Seeded:
    """The UI's known experiment (tests/ui/seed.py) in this test's store."""
    return seed(sessions)


@pytest.fixture
def seeded_api(store_url: str, seeded: Seeded) -> Iterator[httpx.Client]:
    """The orchestrator's API over the seeded store, served on a free port."""
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    with serve_asgi(create_app(settings)) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client
