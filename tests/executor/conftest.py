"""Executor fixtures: the real sandbox over HTTP in both uid modes, with small limits."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient

from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.connections import header_deadline_protocol
from tests.executor.helpers import INTEGRITY_LIMITS
from tests.executor.nonroot import NONROOT_UID, delegated_cgroups, nonroot_executor
from tests.support.jails import (
    fresh_jail_state,
    host_listeners,
    kill_our_leaked_processes,
    recycle_jails,
)


@pytest.fixture(scope="session")
def nonroot_executor_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real executor server run as a non-root user (every slot under its uid), in a cgroup
    subtree delegated to that user where the host has one (as a deployment would give it)."""
    log = tmp_path_factory.mktemp("nonroot-executor") / "server.log"
    env = {f"COBALT_EXECUTOR_{key}": value for key, value in INTEGRITY_LIMITS.items()}
    with (
        delegated_cgroups(NONROOT_UID) as cgroups,
        nonroot_executor(log, cgroups=cgroups, **env) as url,
    ):
        yield url


@pytest.fixture(scope="session")
def root_executor_url(sandbox_pool: SandboxPool) -> Iterator[str]:
    """The executor as root (one uid per slot) on the shared pool, served like `serve`."""
    settings = ExecutorSettings(
        slots=sandbox_pool.config.slots,
        **{key.lower(): value for key, value in INTEGRITY_LIMITS.items()},  # type: ignore[arg-type]
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        create_app(settings, pool=sandbox_pool),
        log_level="warning",
        lifespan="on",
        http=header_deadline_protocol(settings.header_timeout_s),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(timeout=30)
    sock.close()


@pytest.fixture(scope="session", params=["per-slot-uids", "shared-uid"])
def executor_http(request: pytest.FixtureRequest) -> Iterator[httpx.Client]:
    """An HTTP client for the executor in each uid mode: as root with one uid per slot
    (the shared test pool), and as a non-root server whose slots share its uid."""
    name = "root_executor_url" if request.param == "per-slot-uids" else "nonroot_executor_url"
    with httpx.Client(base_url=request.getfixturevalue(name), timeout=120) as client:
        yield client


# --- the red-team suites (test_attacks.py, test_language_attacks.py) --------------------


@pytest.fixture(scope="module")
def baseline(executor_client: TestClient, sandbox_pool: SandboxPool) -> str:
    """What the jail probe prints on fresh jails (both slots must agree)."""
    return fresh_jail_state(executor_client, sandbox_pool)


@pytest.fixture(scope="module")
def listeners() -> Iterator[SimpleNamespace]:
    """Host-side sockets the sandbox must never reach: TCP, UDP, abstract and path UNIX."""
    with host_listeners() as sockets:
        yield sockets


@pytest.fixture
def guard(sandbox_pool: SandboxPool) -> Iterator[SimpleNamespace]:
    """Restart the jails after an attack that did not pass, so failures do not cascade."""
    state = SimpleNamespace(passed=False)
    yield state
    if not state.passed:
        recycle_jails(sandbox_pool)
        kill_our_leaked_processes(sandbox_pool)
