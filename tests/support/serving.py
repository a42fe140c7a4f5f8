"""Serving ASGI apps over real HTTP for clients under test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings


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
