"""What a jail sees of the host beyond its own files: a minimal /dev, and the /proc files
that would tell a test what ran before it or beside it, each masked by an empty file.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile

__all__ = ["ACTIVITY_FILES", "DEVICES", "empty_file", "masked_activity_files", "minimal_dev"]


ACTIVITY_FILES = (
    # The zygote is the jail's init: it reaps every test, so its CPU time, reaped
    # children's time and context switches grow with what earlier tests did.
    "/proc/1/stat",
    "/proc/1/status",
    "/proc/1/sched",
    "/proc/1/schedstat",
    "/proc/1/task/1/stat",
    "/proc/1/task/1/status",
    "/proc/1/task/1/sched",
    "/proc/1/task/1/schedstat",
    "/proc/loadavg",
    # Its second field is the host's idle time over all CPUs: what every slot left idle.
    "/proc/uptime",
    # Host-wide counters that move with what other slots (and the host) do.
    "/proc/stat",
    "/proc/schedstat",
    "/proc/pressure/cpu",
    "/proc/pressure/memory",
    "/proc/pressure/io",
    "/proc/pressure/irq",
    "/proc/meminfo",
    "/proc/vmstat",
    "/proc/zoneinfo",
    "/proc/buddyinfo",
    "/proc/interrupts",
    "/proc/softirqs",
    "/proc/diskstats",
    "/proc/locks",
    "/proc/sys/fs/file-nr",
    "/proc/sys/fs/inode-nr",
    "/proc/sys/fs/inode-state",
    "/proc/sys/fs/dentry-state",
)
"""/proc files that tell a test what ran before it or elsewhere; each jail sees them
empty (an empty file bound over each). A test's own /proc/self is untouched.
`/proc/sys/kernel/ns_last_pid` is not masked: the zygote writes it to reset the pid counter
before each test, so it shows only what the test itself started, as on a fresh jail."""


DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
"""The device nodes a jail's /dev holds (what bubblewrap's `--dev` binds, without a pty)."""


def minimal_dev() -> list[str]:
    """bubblewrap options for a /dev like `--dev`'s, built without it.

    `--dev` mounts a devpts, which makes bubblewrap map the jail's uid to 0 first and
    enter a second, nested user namespace for the program (as `--disable-userns` does).
    The zygote would then hold its capabilities in a namespace that owns neither the
    jail's PID namespace nor anything else, and could not reset the pid counter. Judged
    programs need no pseudo-terminal.
    """
    options = ["--tmpfs", "/dev"]
    for name in DEVICES:
        options += ["--dev-bind", f"/dev/{name}", f"/dev/{name}"]
    options += ["--symlink", "/proc/self/fd", "/dev/fd"]
    for number, name in enumerate(("stdin", "stdout", "stderr")):
        options += ["--symlink", f"/proc/self/fd/{number}", f"/dev/{name}"]
    return options


def masked_activity_files() -> list[str]:
    # A bind needs its target to exist; the jail's procfs offers what the host kernel does.
    # Pid 1's files exist in every fresh procfs: pid 1 is the jail's own init.
    return [path for path in ACTIVITY_FILES if path.startswith("/proc/1/") or os.path.exists(path)]


@functools.cache
def empty_file() -> str:
    """An empty read-only file every slot uid can bind (one per server process)."""
    directory = tempfile.mkdtemp(prefix="cobalt-executor-masks-")
    os.chmod(directory, 0o755)
    path = os.path.join(directory, "empty")
    with open(path, "w"):
        pass
    os.chmod(path, 0o444)
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    return path
