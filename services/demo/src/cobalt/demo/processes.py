"""Child processes of `cobalt demo` and `cobalt up`: start, wait until ready, stop.

Each child runs in its own session (process group), so stopping it also stops what it
started itself (vLLM's engine core, the executor's sandboxes). Its output goes to a log
file, so a failure can quote the lines that explain it instead of flooding the terminal.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cobalt.demo.errors import DemoFailed
from cobalt.shared.clients.base import wait_until_ready
from cobalt.shared.errors import Unavailable

__all__ = ["ChildProcess", "log_tail", "port_is_free"]

DEFAULT_STOP_TIMEOUT_S = 30.0
"""Seconds a child gets after SIGTERM before its whole group is killed."""


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # As uvicorn binds: a port whose closed connections linger in TIME_WAIT is free to
        # serve on (a listener still refuses the bind).
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
        return True


def log_tail(path: Path, lines: int = 12) -> str:
    """The last lines of a log file ("" if there is none)."""
    if not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return "\n".join(text[-lines:])


@dataclass
class ChildProcess:
    """One service the demo or `cobalt up` runs: its command, environment and log."""

    name: str
    command: Sequence[str]
    log_path: Path
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    ready_url: str | None = None
    """GET answers 200 once the service is ready; None: ready once started."""
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            try:
                self.process = subprocess.Popen(
                    list(self.command),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=dict(self.env),
                    start_new_session=True,
                )
            except OSError as exc:
                raise DemoFailed(
                    f"cannot start the {self.name} ({self.command[0]}): {exc.strerror or exc}; "
                    "run `make setup`"
                ) from exc

    def is_running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()

    def failure(self, what: str) -> DemoFailed:
        """An error naming this child, its log and the log's last lines."""
        tail = log_tail(self.log_path)
        shown = f"\n{tail}" if tail else ""
        return DemoFailed(f"the {self.name} {what} (log: {self.log_path}){shown}")

    def wait_ready(self, timeout_s: float, on_tick: Callable[[float], None] | None = None) -> float:
        """Poll `ready_url` until it answers 200; returns the seconds waited.

        Raises:
            DemoFailed: the process exited, or was not ready within `timeout_s`.
        """
        if self.ready_url is None:
            if not self.is_running():
                raise self.failure(f"exited with code {self.returncode} while starting")
            return 0.0
        try:
            return wait_until_ready(
                self.ready_url, timeout_s=timeout_s, is_alive=self.is_running, on_tick=on_tick
            )
        except Unavailable as exc:
            if not self.is_running():
                raise self.failure(f"exited with code {self.returncode} while starting") from exc
            raise self.failure(f"was not ready after {timeout_s:g} s") from exc

    def stop(self, timeout_s: float = DEFAULT_STOP_TIMEOUT_S) -> None:
        """SIGTERM the child's process group, then SIGKILL whatever is left of it."""
        process = self.process
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=timeout_s)
        # Grandchildren (vLLM's engine core) may outlive a parent that exited on SIGTERM.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
