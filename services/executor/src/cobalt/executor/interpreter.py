"""The Python that runs untrusted code, and what must be visible in a jail for it to start.

The jail's root holds nothing but the interpreter binary, its standard library and the
shared libraries those load (found with ldd), so no shell, no /etc and no project files
are reachable from inside.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cobalt.executor.errors import SandboxUnavailable

__all__ = ["Interpreter", "describe_interpreter"]


@dataclass(frozen=True)
class Interpreter:
    """The Python that runs untrusted code, and what must be visible for it to start."""

    path: str
    version: str
    read_only_dirs: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...]
    toolchain_binds: tuple[tuple[str, str], ...] = ()
    """(host path, jail path) of other languages' toolchains (languages.py), bound read-only."""


_PROBE = (
    "import json, sys, sysconfig;"
    "print(json.dumps({'version': sys.version.split()[0],"
    " 'executable': sys.executable,"
    " 'stdlib': sysconfig.get_paths()['stdlib'],"
    " 'platstdlib': sysconfig.get_paths()['platstdlib'],"
    " 'dynload': sysconfig.get_config_var('DESTSHARED') or ''}))"
)


def _shared_library_dirs(binaries: list[str]) -> set[str]:
    """Directories holding every shared library the binaries load, found with ldd."""
    ldd = shutil.which("ldd")
    if ldd is None or not binaries:
        return {"/usr/lib", "/usr/lib64", "/lib", "/lib64"}
    dirs: set[str] = set()
    out = subprocess.run([ldd, *binaries], capture_output=True, text=True, check=False).stdout
    for line in out.splitlines():
        for token in line.split():
            if token.startswith("/") and os.path.exists(token):
                dirs.add(os.path.dirname(token))
                dirs.add(os.path.dirname(os.path.realpath(token)))
    return dirs


def describe_interpreter(python: str) -> Interpreter:
    """Find what `python` needs to start in an empty root: its stdlib and library dirs.

    Raises:
        SandboxUnavailable: the interpreter does not exist or does not run.
    """
    real = os.path.realpath(shutil.which(python) or python)
    if "/.pyenv/shims/" in real or not os.access(real, os.X_OK):
        raise SandboxUnavailable(
            f"sandbox interpreter {python!r} is not an executable Python binary "
            "(pyenv shims are refused: they start 100x slower); "
            "set COBALT_EXECUTOR_PYTHON to a real interpreter such as /usr/bin/python3"
        )
    try:
        probe = subprocess.run(
            [real, "-s", "-S", "-c", _PROBE], capture_output=True, text=True, timeout=30
        )
        facts = json.loads(probe.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"cannot run sandbox interpreter {real}: {exc}") from exc
    dirs = {facts["stdlib"], facts["platstdlib"]}
    binaries = [real]
    dynload = facts["dynload"]
    if dynload and os.path.isdir(dynload):
        dirs.add(dynload)
        binaries += [str(p) for p in sorted(Path(dynload).glob("*.so"))]
    dirs |= _shared_library_dirs(binaries)
    dirs.add(os.path.dirname(real))
    # Keep only the outermost directories, and never bind the whole of /usr or /.
    kept: list[str] = []
    # Real paths only: /lib and friends become symlinks into /usr inside the jail too.
    real_dirs = {os.path.realpath(d) for d in dirs}
    for path in sorted(d for d in real_dirs if d not in ("/", "/usr")):
        if not any(path.startswith(parent + "/") for parent in kept):
            kept.append(path)
    symlinks = tuple(
        (os.readlink(f"/{name}"), f"/{name}")
        for name in ("bin", "lib", "lib32", "lib64", "libx32", "sbin")
        if os.path.islink(f"/{name}")
    )
    # Binding the interpreter's directory would expose every other program in it (shells,
    # curl, ...): bind just the binary instead when that directory is a bin/ folder.
    final = tuple(p for p in kept if not p.endswith("/bin")) + (real,)
    return Interpreter(path=real, version=facts["version"], read_only_dirs=final, symlinks=symlinks)
