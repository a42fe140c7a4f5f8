"""The executor as the shipped deployments run it: a non-root server whose every slot
runs under the server's own uid (k8s and compose run it as a plain user).

These machines run the tests as root, so the server is started as a dedicated uid with
`setpriv`. The venv's interpreter lives under /root (not readable by other users), so the
server runs on the system Python of the same version with the venv's site-packages added.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

import cobalt.executor
from cobalt.shared.ports import free_port

NONROOT_UID = 61990
"""The server's uid in shared-uid mode: outside every per-slot range (61000 + slot)."""

_BOOT = (
    "import site, sys; site.addsitedir(sys.argv[1]); "
    "sys.argv = ['cobalt', 'executor', 'serve']; "
    "from cobalt.shared.commands import main; main()"
)


def _system_python() -> str:
    wanted = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{wanted}", f"/usr/local/bin/{wanted}"):
        if os.access(candidate, os.X_OK) and not candidate.startswith(sys.prefix):
            return candidate
    raise RuntimeError(f"the non-root executor tests need /usr/bin/{wanted} (the venv's version)")


def _unreadable_by_nonroot(*paths: str) -> list[str]:
    """The paths uid NONROOT_UID cannot read (a checkout under a closed home directory)."""
    as_nonroot = ["setpriv", f"--reuid={NONROOT_UID}", f"--regid={NONROOT_UID}", "--clear-groups"]
    return [
        path
        for path in paths
        if subprocess.run([*as_nonroot, "/usr/bin/test", "-r", path], check=False).returncode
    ]


@contextmanager
def delegated_cgroups(uid: int) -> Iterator[list[Path]]:
    """cgroup v1 `memory` and `pids` directories handed to `uid` (v1's delegation: chown).

    Yields no directories when this host has no writable cgroup v1 memory and pids
    hierarchies (the server then runs on its fallback, as `CGROUPS=auto` does).
    """
    own = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            own[controller] = path.lstrip("/")
    name = f"cobalt-nonroot-test-{os.getpid()}-{secrets.token_hex(3)}"
    root = Path("/sys/fs/cgroup")
    dirs = [
        root / "memory" / own.get("memory", "") / name,
        root / "pids" / own.get("pids", "") / name,
    ]
    try:
        for directory in dirs:
            directory.mkdir(exist_ok=True)
            for path in (directory, directory / "cgroup.procs", directory / "tasks"):
                os.chown(path, uid, uid)
    except OSError:
        dirs = [directory for directory in dirs if directory.is_dir()]
        for directory in dirs:
            directory.rmdir()
        yield []
        return
    try:
        yield dirs
    finally:
        for directory in dirs:
            for _ in range(100):
                leftovers = sorted(directory.rglob("*/"), key=lambda p: -len(p.parts))
                try:
                    for child in [*leftovers, directory]:
                        if child.is_dir():
                            child.rmdir()
                    break
                except OSError:
                    time.sleep(0.05)


def _enter_cgroups(dirs: list[Path]) -> None:
    for directory in dirs:
        (directory / "cgroup.procs").write_text("0")


@contextmanager
def nonroot_executor(log: Path, cgroups: list[Path] | None = None, **env: str) -> Iterator[str]:
    """`cobalt executor serve` as uid NONROOT_UID; yields its base URL.

    With `cgroups` (from `delegated_cgroups`) the server starts inside them, so it may
    create per-slot cgroups there as a delegated non-root service does.

    Skips (with the reason) when that uid cannot read the checkout or the venv, e.g. a
    clone under root's home directory (mode 700): the server could not import Cobalt.
    """
    if os.geteuid() != 0:
        raise RuntimeError("starting a server as another uid needs root")
    site_packages = sysconfig.get_paths()["purelib"]
    closed = _unreadable_by_nonroot(site_packages, str(Path(cobalt.executor.__file__).parent))
    if closed:
        pytest.skip(
            f"uid {NONROOT_UID} cannot read {', '.join(closed)}: clone the project under a "
            "directory other users can enter (not a 0700 home) to run the shared-uid tests"
        )
    port = free_port()
    environment = {
        "HOME": "/tmp",
        "PATH": "/usr/bin:/bin",
        "COBALT_EXECUTOR_PORT": str(port),
        "COBALT_EXECUTOR_SLOTS": "2",
        # A worktree's sources put ahead of the venv's editable install (as for this process).
        **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}),
        **env,
    }
    command = [
        "setpriv",
        f"--reuid={NONROOT_UID}",
        f"--regid={NONROOT_UID}",
        "--clear-groups",
        _system_python(),
        "-c",
        _BOOT,
        site_packages,
    ]
    with log.open("wb") as sink:
        server = subprocess.Popen(
            command,
            env=environment,
            stdout=sink,
            stderr=subprocess.STDOUT,
            cwd="/",
            preexec_fn=(lambda: _enter_cgroups(cgroups)) if cgroups else None,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if server.poll() is not None:
                raise RuntimeError(
                    f"the non-root executor exited ({server.returncode}); its log:\n"
                    + log.read_text()[-3000:]
                    + "\n(is the checkout readable by other users?)"
                )
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the non-root executor did not answer within 60 s")
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
