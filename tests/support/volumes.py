"""A small volume of the test's own (a tmpfs mounted on a directory under tmp_path) that a
test fills up, makes read-only, and restores: the checkpoint volume faults of issue 38.

Why a mount: the tests run as root on CI, where file modes cannot make a directory
unwritable (root writes anyway), and filling the machine's real disk is out of the
question. A tmpfs of a few megabytes is full for real (ENOSPC from the kernel) and
remounted read-only for real (EROFS). Without the privilege to mount, the tests that need
it are skipped with the reason.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


class SmallVolume:
    """A tmpfs at `path`: `fill` it, `free` it, `read_only` and `writable` again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / ".filler"

    def fill(self) -> None:
        """Write a filler file until the volume is full (the kernel says ENOSPC)."""
        block = b"\0" * 65536
        with self.filler.open("ab") as out, contextlib.suppress(OSError):
            while True:
                out.write(block)
                out.flush()

    def free(self) -> None:
        self.filler.unlink(missing_ok=True)

    def read_only(self) -> None:
        self._remount("ro")

    def writable(self) -> None:
        self._remount("rw")

    def _remount(self, mode: str) -> None:
        # A file open for writing makes a read-only remount busy: try again briefly.
        deadline = time.monotonic() + 10
        while True:
            done = subprocess.run(
                ["mount", "-o", f"remount,{mode}", str(self.path)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode == 0:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"remount {mode} of {self.path}: {done.stderr}")
            time.sleep(0.1)


def can_mount(directory: Path) -> str | None:
    """None when a tmpfs can be mounted here, else why not."""
    probe = directory / ".mount-probe"
    probe.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        probe.rmdir()
        return done.stderr.strip() or "mount failed"
    subprocess.run(["umount", str(probe)], check=True)
    probe.rmdir()
    return None


@contextlib.contextmanager
def small_volume(path: Path, size_bytes: int) -> Iterator[SmallVolume]:
    """A tmpfs of `size_bytes` at `path` for the block (skips the test where mounting is
    not allowed); unmounted after it, whatever is still open."""
    why_not = can_mount(path.parent)
    if why_not is not None:
        pytest.skip(f"a tmpfs cannot be mounted here ({why_not}): needs root")
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(path)], check=True
    )
    try:
        yield SmallVolume(path)
    finally:
        subprocess.run(["umount", "--lazy", str(path)], check=False)
