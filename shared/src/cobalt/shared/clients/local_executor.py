"""A short-lived executor process on this machine, for tools that need one now and then.

`local_executor()` starts `cobalt executor serve` as a child process on a free port of
127.0.0.1, waits until its `/readyz` canary passes, yields an `ExecutorClient` for it and
stops the process afterwards. The process is started through the command line (not by
importing the executor's code) because services never import one another: this lets the
orchestrator's CLI verify reference solutions without an executor deployment.

A random bearer token is generated for each process, so other users of the machine
cannot submit programs to it while it runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from cobalt.shared.clients.base import wait_until_ready
from cobalt.shared.clients.executor import ExecutorClient
from cobalt.shared.errors import Unavailable
from cobalt.shared.ports import free_port

__all__ = [
    "DEFAULT_READY_TIMEOUT_S",
    "DEFAULT_STOP_TIMEOUT_S",
    "cobalt_command",
    "local_executor",
]

logger = logging.getLogger(__name__)

DEFAULT_READY_TIMEOUT_S = 90.0
"""Seconds to wait for the process's sandboxes to pass the readiness canary."""

DEFAULT_STOP_TIMEOUT_S = 15.0
"""Seconds between SIGTERM (graceful shutdown) and SIGKILL."""

_POLL_S = 0.2
"""Seconds between readiness probes."""


def cobalt_command() -> list[str]:
    """How to run the `cobalt` command of this interpreter's environment."""
    script = Path(sys.executable).parent / "cobalt"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-c", "from cobalt.shared.commands import main; main()"]


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def _stop(process: subprocess.Popen[bytes], timeout_s: float) -> None:
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        logger.warning("local executor pid %d ignored SIGTERM; killing it", process.pid)
        process.kill()
        process.wait()


def _wait_ready(
    client: ExecutorClient, process: subprocess.Popen[bytes], *, log: Path, timeout_s: float
) -> None:
    try:
        wait_until_ready(
            f"{client.base_url.rstrip('/')}/readyz",
            timeout_s=timeout_s,
            is_alive=lambda: process.poll() is None,
            interval_s=_POLL_S,
            headers={"Authorization": f"Bearer {client.token}"} if client.token else None,
        )
    except Unavailable as exc:
        if process.poll() is not None:
            raise Unavailable(
                f"the local executor exited with status {process.returncode} before it was "
                f"ready: {_tail(log) or 'no output'}"
            ) from exc
        raise Unavailable(
            f"the local executor was not ready within {timeout_s:.0f}s: "
            f"{_tail(log) or 'no output'}; set COBALT_EXECUTOR_URL to use a running executor "
            "instead"
        ) from exc


@contextlib.contextmanager
def local_executor(
    *,
    command: Sequence[str] | None = None,
    extra_args: Sequence[str] = (),
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
    stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S,
) -> Iterator[ExecutorClient]:
    """Run an executor process for the duration of the `with` block.

    Args:
        command: How to run `cobalt` (default: `cobalt_command()`).
        extra_args: More `cobalt executor serve` options (e.g. `--slots 2`).
        ready_timeout_s: Seconds to wait for `/readyz`.
        stop_timeout_s: Seconds to wait for a graceful stop before killing.

    Yields:
        A client for the process (closed, and the process stopped, on exit).

    Raises:
        Unavailable: the process could not be started, exited early or never got ready
            (the message carries the end of its log).
    """
    port = free_port()
    token = secrets.token_urlsafe(24)
    argv = [
        *(command or cobalt_command()),
        *("executor", "serve", "--host", "127.0.0.1", "--port", str(port)),
        *extra_args,
    ]
    env = {**os.environ, "COBALT_EXECUTOR_AUTH_TOKEN": token}
    with tempfile.TemporaryDirectory(prefix="cobalt-local-executor-") as workdir:
        log = Path(workdir) / "executor.log"
        with log.open("wb") as log_file:
            try:
                # Its own process group: Ctrl-C in the terminal reaches only the command,
                # which stops its jobs first and this process after them (a child that
                # died first would make every in-flight job retry against it).
                process = subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log_file,
                    stderr=log_file,
                    env=env,
                    process_group=0,
                )
            except OSError as exc:
                raise Unavailable(
                    f"cannot start a local executor ({argv[0]}): {exc.strerror or exc}"
                ) from exc
        logger.info("local executor pid %d starting on port %d", process.pid, port)
        try:
            with ExecutorClient(base_url=f"http://127.0.0.1:{port}", token=token) as client:
                _wait_ready(client, process, log=log, timeout_s=ready_timeout_s)
                yield client
        finally:
            _stop(process, stop_timeout_s)
            logger.info("local executor pid %d stopped", process.pid)
