"""Fixtures shared by the whole suite.

One sandbox pool is started per test session and shared by every executor app the tests
build, because starting jails costs time and the pool is the expensive, stateful part.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings

SANDBOX_SLOTS = 2


@pytest.fixture(scope="session")
def executor_settings() -> ExecutorSettings:
    return ExecutorSettings(slots=SANDBOX_SLOTS, max_pending_tests=512)


@pytest.fixture(scope="session")
def sandbox_pool(executor_settings: ExecutorSettings) -> Iterator[SandboxPool]:
    pool = SandboxPool(executor_settings.sandbox_config())
    pool.start()
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def executor_client(
    executor_settings: ExecutorSettings, sandbox_pool: SandboxPool
) -> Iterator[TestClient]:
    """An HTTP client for an executor app on the shared pool (no auth)."""
    with TestClient(create_app(executor_settings, pool=sandbox_pool)) as client:
        yield client
