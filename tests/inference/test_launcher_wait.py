"""The vLLM launcher's wait for readiness: a process that dies is reported at once, with its log."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cobalt.inference.launcher import ServerFailed, wait_until_ready
from tests.support.scripted_server import Reply, scripted_server


def test_a_server_that_answers_200_is_ready() -> None:
    with scripted_server(Reply(503), Reply(200, {})) as server:
        wait_until_ready(server.url, None, timeout_s=60)
    assert server.requests == [("GET", "/ready")] * 2


def test_a_process_that_exits_fails_with_its_code_and_log(tmp_path: Path) -> None:
    log = tmp_path / "vllm.log"
    log.write_text("loading model\nCUDA out of memory\n")
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()
    with scripted_server() as server:
        with pytest.raises(ServerFailed, match="exited with code 3") as caught:
            wait_until_ready(server.url, process, timeout_s=60, log_path=log)
    assert "CUDA out of memory" in str(caught.value)
    assert server.requests == []


def test_a_server_never_ready_fails_after_the_timeout() -> None:
    with scripted_server(Reply(503)) as server:
        with pytest.raises(ServerFailed, match="not ready after 0 s"):
            wait_until_ready(server.url, None, timeout_s=0)
