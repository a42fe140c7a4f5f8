"""The container engine for tests/containers: found, driven and cleaned up by these helpers.

The engine is the one `make images` uses (scripts/container-engine.sh decides: podman,
then docker, whichever answers), with the same podman settings. Images are built with
scripts/build-images.sh, so a test runs exactly what `make images` produces; an image
that is up to date builds in seconds from the engine's layer cache.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD_TIMEOUT_S = 3600
"""A first build of the CPU set downloads vLLM, torch and verl: tens of minutes."""


@dataclass(frozen=True)
class Engine:
    """podman or docker, with the environment scripts/container-engine.sh sets up."""

    command: str
    env: dict[str, str] = field(default_factory=dict)

    def run(
        self, *args: str, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.command, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **self.env},
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"{self.command} {shlex.join(args)[:400]} failed ({result.returncode}):\n"
                f"{result.stderr[-3000:]}"
            )
        return result

    def logs(self, container: str) -> str:
        result = self.run("logs", container, check=False)
        return result.stdout + result.stderr

    def remove(self, *containers: str) -> None:
        if containers:
            self.run("rm", "--force", "--time", "5", *containers, check=False)


def find_engine() -> Engine:
    """The engine `make images` uses; skips (with the reason) only when there is none."""
    script = (
        f"source {shlex.quote(str(ROOT / 'scripts' / 'container-engine.sh'))} && "
        'engine=$(container_engine) && printf "%s\\n%s\\n" "$engine" "$CONTAINERS_CONF"'
    )
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, timeout=900, cwd=ROOT
    )
    if result.returncode != 0:
        if shutil.which("podman"):
            pytest.fail(f"podman is installed but does not work: {result.stderr.strip()}")
        pytest.skip(f"no container engine: {result.stderr.strip()}")
    command, conf = result.stdout.split()
    return Engine(command, {"CONTAINERS_CONF": conf})


def build_images(*names: str) -> None:
    """`make images` for these images (fast when they are up to date)."""
    result = subprocess.run(
        [str(ROOT / "scripts" / "build-images.sh"), *names],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        cwd=ROOT,
    )
    assert result.returncode == 0, (
        f"scripts/build-images.sh {' '.join(names)} failed:\n"
        f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    )


def wait_until(
    ready: Callable[[], bool], timeout_s: float, what: str, diagnose: Callable[[], str]
) -> None:
    """Poll `ready` until it is true; fail with `diagnose()` (logs) after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if ready():
            return
        time.sleep(1.0)
    raise AssertionError(f"{what} not within {timeout_s:.0f} s:\n{diagnose()[-6000:]}")


def answers_200(url: str, headers: dict[str, str] | None = None) -> bool:
    try:
        return httpx.get(url, headers=headers, timeout=15).status_code == 200
    except httpx.HTTPError:
        return False
