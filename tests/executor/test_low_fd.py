"""A low-fd executor (`cobalt executor serve` under RLIMIT_NOFILE 200, in a subprocess)
keeps its tests' descriptors whatever anonymous clients do: hundreds of idle connections
and docs-asset downloads that never read are refused past the connection limit as they
are accepted (issue 48, degraded: 1,470 anonymous downloads took every descriptor of a
512-fd executor, and its tests then failed for want of a pipe)."""

from __future__ import annotations

import os
import resource
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from cobalt.executor.fd_budget import connection_limit
from cobalt.shared.docs import ASSETS_PATH
from tests.support.serving import executor_process

NOFILE = 200
SLOTS = 2
TOKEN = "low-fd-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _low_nofile() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (NOFILE, NOFILE))


@pytest.fixture(scope="module")
def low_fd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    settings = {
        "COBALT_EXECUTOR_SLOTS": str(SLOTS),
        "COBALT_EXECUTOR_AUTH_TOKEN": TOKEN,
        "COBALT_EXECUTOR_NOFILE": "64",  # a test's own limit fits under the server's
    }
    log = tmp_path_factory.mktemp("low-fd") / "server.log"
    with executor_process(settings, log, preexec_fn=_low_nofile) as (process, url):
        yield process.pid, url


def _flood(port: int, count: int) -> list[socket.socket]:
    """`count` anonymous connections: idle ones, and asset downloads never read."""
    held = []
    for index in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        if index % 3 == 0:
            sock.sendall(
                f"GET {ASSETS_PATH}/swagger-ui-bundle.js HTTP/1.1\r\nHost: x\r\n\r\n".encode()
            )
        held.append(sock)
    return held


def test_anonymous_connections_never_take_a_low_fd_executors_descriptors(
    low_fd_server: tuple[int, str],
) -> None:
    pid, url = low_fd_server
    port = int(url.rsplit(":", 1)[1])
    program = "import time\ntime.sleep(0.2)\nprint(input())\n"
    tests = [{"stdin": str(i), "expected_stdout": str(i)} for i in range(8)]
    with httpx.Client(base_url=url, headers=AUTH, timeout=120) as client:
        # The judging client's connection is open before the flood (as a real caller's
        # kept-alive connection is); its tests need new pipes while the flood is held.
        assert client.get("/healthz").status_code == 200
        held = _flood(port, 2 * NOFILE)
        try:
            with ThreadPoolExecutor(1) as runner:
                judged = runner.submit(
                    client.post, "/v1/execute", json={"code": program, "tests": tests}
                )
                fds = len(os.listdir(f"/proc/{pid}/fd"))
                response = judged.result()
            refused = 0
            for sock in held:
                sock.settimeout(5)
                try:
                    refused += sock.recv(12).startswith(b"HTTP/1.1 503")
                except OSError:
                    pass
        finally:
            for sock in held:
                sock.close()
        assert response.status_code == 200, response.text[:500]
        assert [r["verdict"] for r in response.json()["results"]] == ["accepted"] * len(tests)
        assert fds < NOFILE - 16  # the slots' descriptors stayed free
        limit = connection_limit(SLOTS, NOFILE)
        assert limit is not None
        assert refused >= 2 * NOFILE - limit  # told why, not left hanging
        assert client.get("/healthz").status_code == 200
