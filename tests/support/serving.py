"""Serving ASGI apps over real HTTP for clients under test."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.ports import free_port


@contextmanager
def serve_asgi(app: Any) -> Iterator[str]:
    """An ASGI app served by uvicorn on a free localhost port; yields its base URL.

    Clients under test talk to it over real HTTP connections (Starlette's TestClient is
    an httpx2 client when huggingface_hub is installed, not the httpx our clients use).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", lifespan="on", loop="asyncio")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


@contextmanager
def serve_executor(settings: ExecutorSettings, pool: SandboxPool) -> Iterator[str]:
    """The executor app on the shared pool, served over real HTTP; yields its base URL."""
    with serve_asgi(create_app(settings, pool=pool)) as url:
        yield url


@contextmanager
def executor_process(
    settings: dict[str, str],
    log: Path,
    *,
    preexec_fn: Callable[[], None] | None = None,
    host: str = "127.0.0.1",
    port: int | None = None,
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """`cobalt executor serve` in its own process, as a deployment runs it (the server's
    own limits, its own fd table), with `settings` (COBALT_EXECUTOR_*) and nothing else of
    ours from the environment; yields the process and its URL once /readyz says ready,
    and stops it with SIGTERM afterwards. Output goes to `log`. It listens on `host` and
    `port` (a free one unless given)."""
    port = port or free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("COBALT_")},
        "COBALT_EXECUTOR_HOST": host,
        "COBALT_EXECUTOR_PORT": str(port),
        **settings,
    }
    boot = "import sys; sys.argv = ['cobalt', 'executor', 'serve']; "
    boot += "from cobalt.shared.commands import main; main()"
    with log.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-c", boot],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            preexec_fn=preexec_fn,
        )
    url = f"http://{host}:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert process.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the executor did not become ready"
            time.sleep(0.2)
        yield process, url
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
