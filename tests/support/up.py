"""`cobalt up` as a user runs it in a terminal: started, read until its services are up,
then stopped with Ctrl-C (SIGINT), whatever the test found in between."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

COBALT = [str(Path(sys.executable).parent / "cobalt")]
READY_LINE = "web UI: "
"""What `cobalt up` prints once every service is ready."""


@dataclass
class UpProcess:
    process: subprocess.Popen[str]
    lines: list[str] = field(default_factory=list)
    """Its standard error, line by line, as read so far."""

    @property
    def stderr(self) -> str:
        return "".join(self.lines)


@contextmanager
def cobalt_up(*args: str, env: dict[str, str], timeout_s: float = 120) -> Iterator[UpProcess]:
    """`cobalt up ARGS`, yielded once it says its services are ready; Ctrl-C on the way out."""
    process = subprocess.Popen(
        [*COBALT, "up", *args],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert process.stderr is not None
    up = UpProcess(process)
    reader = threading.Thread(target=lambda: up.lines.extend(iter(process.stderr.readline, "")))  # type: ignore[union-attr]
    reader.start()
    try:
        deadline = time.monotonic() + timeout_s
        while not any(line.startswith(READY_LINE) for line in up.lines):
            assert process.poll() is None, up.stderr
            assert time.monotonic() < deadline, f"cobalt up did not start: {up.stderr}"
            time.sleep(0.2)
        yield up
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            # Fail the test, but leave no services behind to take later tests' work
            # (their workers would drain the test queue): SIGTERM stops the children too.
            process.terminate()
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                process.kill()
            raise
        finally:
            reader.join(timeout=10)
        process.stderr.close()
