"""Per-slot cgroups: the kernel charges a jail for everything it uses, kernel memory included.

The zygote's 50 ms polls see a jail's processes and tmpfs files, but not what the kernel
holds for them (socket and pipe buffers, page tables, slab); RLIMIT_NPROC counts per uid,
so slots that share the server's uid share one process budget. A cgroup per slot closes
both: its memory limit covers user and kernel memory together and an over-limit jail is
OOM-killed inside its own cgroup, and its `pids.max` bounds the jail's processes
whatever its uid.

Who is killed at the limit: the test's processes raise their `oom_score_adj` to 1000, but
any of them may lower it again to the zygote's (0; only a writer with CAP_SYS_RESOURCE,
which a container's root lacks, could set a floor), and a program that then holds its
memory in the kernel (socket buffers) from small processes had the kernel kill the zygote,
the biggest process left, and with it the jail (tests/executor/test_language_attacks.py).
So in v1 each slot's memory cgroup has a child, `test`, with the test's limit, and the
zygote moves each test's process into it before the test starts (through a descriptor of
its `cgroup.procs` the server opens; `SlotCgroup.open_test_procs`): the kernel then kills
at that child's limit, and only among the test's processes. v2's rule against processes
in a cgroup with children would need the zygote in a leaf of its own: not done, there a
program can still have its jail's zygote killed (docs/executor.md, "Known limits").

Where the host offers them:

- **cgroup v1** (as on these machines): the `memory` and `pids` hierarchies, as root or
  in a subtree chowned to the server's user (v1's delegation).
- **cgroup v2**: a subtree delegated to the server (its own cgroup is writable and offers
  the `memory` and `pids` controllers), as systemd's `Delegate=yes` or a container runtime
  that mounts the cgroup tree writable gives it. The server moves itself into a leaf
  before it hands the controllers down, when that has not been done for it. Only checked
  against a directory tree that mimics one (tests/executor/test_cgroup_v2.py): these
  machines mount v1 only.

Slot cgroups live under the server's own cgroup, in `cobalt-executor-<pid>-<n>/slot<i>`
(one tree per pool), and are removed at shutdown. Without cgroups
(`COBALT_EXECUTOR_CGROUPS=auto` on a host that offers none), rlimits and the zygote's
polls remain; `required` refuses to start instead.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from cobalt.executor.errors import SandboxUnavailable

__all__ = [
    "CgroupMode",
    "SlotCgroup",
    "SlotCgroups",
    "open_slot_cgroups",
]

logger = logging.getLogger(__name__)

CgroupMode = Literal["auto", "required", "off"]
CGROUP_FS = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
ZYGOTE_HEADROOM_MB = 64
"""Memory a jail may hold on top of its test's `memory_mb`: the zygote, its spare child
and the kernel's own structures for them. Limits inside it stay the zygote's to judge.
With a test cgroup (v1), the test's processes get this much on top of `memory_mb` in
theirs, and the slot as much again for the zygote."""
ZYGOTE_PROCESSES = 8
TEST_CGROUP = "test"
"""v1: the child of a slot's memory cgroup that holds the running test's processes."""
"""Processes a jail holds besides its test's: bubblewrap, the zygote, its spare child."""


@dataclass
class SlotCgroup:
    """One slot's cgroup directories: `memory` and `pids` (one directory in v2)."""

    version: int
    memory: Path
    pids: Path
    test_memory: Path | None = None
    """v1: the memory cgroup of the running test's processes, inside `memory` (None: they
    stay in the slot's own)."""
    _limit_bytes: int = 0
    _ooms_before: int = 0
    _events_fds: dict[Path, int] = field(default_factory=dict)

    def enter_self(self) -> None:
        """Move the calling process into this cgroup (the slot's child, before exec).

        Runs between fork and exec: plain writes only, no logging, no allocation-heavy work.
        """
        for directory in {self.memory, self.pids}:
            fd = os.open(directory / "cgroup.procs", os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def open_test_procs(self) -> int | None:
        """A descriptor that moves the pid written to it into the test's memory cgroup
        (the zygote writes each test's process to it), or None where there is none.

        Opened by the server: the kernel checks the opener's credentials on each write.
        """
        if self.test_memory is None:
            return None
        try:
            return os.open(self.test_memory / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError as exc:
            logger.warning(
                "tests share their slot's cgroup: cannot open %s: %s", self.test_memory, exc
            )
            return None

    def grant(self, uid: int) -> None:
        """Let processes of `uid` (the slot's own, when the server is root) move themselves in."""
        for directory in {self.memory, self.pids}:
            os.chown(directory / "cgroup.procs", uid, -1)

    def prepare(self, memory_mb: int) -> None:
        """Set the jail's memory limit for the next test and note its OOM-kill count.

        Raises:
            SandboxUnavailable: the limit could not be set (lowering it below what the jail
                already holds fails when the kernel cannot reclaim enough): restart the jail.
        """
        limit = (memory_mb + ZYGOTE_HEADROOM_MB) << 20
        if limit != self._limit_bytes:
            try:
                self._set_memory_limits(limit)
            except _NoCgroups as exc:
                self._limit_bytes = 0
                raise SandboxUnavailable(str(exc)) from exc
            self._limit_bytes = limit
        self._ooms_before = self.oom_kills()

    def oom_killed_since_prepare(self) -> bool:
        """The kernel OOM-killed a process of this jail since `prepare`."""
        return self.oom_kills() > self._ooms_before

    def oom_kills(self) -> int:
        """How many processes the kernel OOM-killed in this cgroup (and its test's) so far."""
        # v1 counts a kill only in the cgroup whose limit was reached; v2's count is the
        # whole subtree's.
        return sum(self._oom_kills(d) for d in (self.memory, self.test_memory) if d is not None)

    def _oom_kills(self, directory: Path) -> int:
        # Read twice per test: one descriptor kept open and re-read from offset 0 costs a
        # fraction of opening the file each time.
        fd = self._events_fds.get(directory)
        if fd is None:
            name = "memory.oom_control" if self.version == 1 else "memory.events"
            try:
                fd = self._events_fds[directory] = os.open(
                    directory / name, os.O_RDONLY | os.O_CLOEXEC
                )
            except OSError:
                return 0
        try:
            text = os.pread(fd, 4096, 0)
        except OSError:
            return 0
        found = re.search(rb"^oom_kill (\d+)$", text, re.MULTILINE)
        return int(found.group(1)) if found else 0

    def _set_memory_limits(self, limit: int) -> None:
        if self.version == 2:
            _write(self.memory / "memory.max", str(limit))
            _write(self.memory / "memory.swap.max", "0", missing_ok=True)
            return
        if self.test_memory is None:
            _set_v1_limit(self.memory, limit)
            return
        # The test's cgroup gets the limit the whole jail had; the jail the zygote's share
        # on top, so that only the test's own limit is ever reached. Lowered inside out,
        # raised outside in: a parent below its child's usage would have to reclaim it.
        slot_limit = limit + (ZYGOTE_HEADROOM_MB << 20)
        current = int((self.test_memory / "memory.limit_in_bytes").read_text())
        order = [(self.memory, slot_limit), (self.test_memory, limit)]
        for directory, value in order if limit > current else order[::-1]:
            _set_v1_limit(directory, value)

    def remove(self) -> None:
        """Remove the directories once the jail's last process has gone (it may take a moment
        after the jail was killed: the kernel tears its PID namespace down asynchronously)."""
        for fd in self._events_fds.values():
            os.close(fd)
        self._events_fds.clear()
        for directory in [d for d in (self.test_memory, self.memory, self.pids) if d is not None]:
            for attempt in range(50):
                try:
                    directory.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError as exc:
                    if exc.errno != errno.EBUSY or attempt == 49:
                        logger.warning("could not remove cgroup %s: %s", directory, exc)
                        break
                    time.sleep(0.02)


@dataclass
class SlotCgroups:
    """The cgroups of all slots, or none when the host offers no usable cgroups."""

    version: int | None
    """1 or 2, or None: no cgroups (rlimits and the zygote's polls only)."""
    parents: list[Path] = field(default_factory=list)
    slots: list[SlotCgroup] = field(default_factory=list)
    reason: str = ""
    """Why there are none (logged, and shown by `/v1/info`)."""

    def describe(self) -> str:
        return f"cgroup-v{self.version}" if self.version else "no-cgroups"

    def close(self) -> None:
        for slot in self.slots:
            slot.remove()
        for parent in self.parents:
            try:
                parent.rmdir()
            except OSError:
                pass


def open_slot_cgroups(
    mode: CgroupMode,
    slots: int,
    pids_per_slot: int,
    root: Path = CGROUP_FS,
    membership: Path = PROC_SELF_CGROUP,
) -> SlotCgroups:
    """Create one cgroup per slot if the host allows it.

    `root` is where the cgroup filesystems are mounted and `membership` the file that says
    which cgroup this process is in (`/proc/self/cgroup`); tests pass a directory tree
    that mimics one.

    Raises:
        SandboxUnavailable: `mode` is "required" and cgroups cannot be used here (the
            message says why and what to change).
    """
    if mode == "off":
        return SlotCgroups(version=None, reason="turned off (COBALT_EXECUTOR_CGROUPS=off)")
    try:
        cgroups = _create(slots, pids_per_slot + ZYGOTE_PROCESSES, root, membership)
    except _NoCgroups as exc:
        if mode == "required":
            raise SandboxUnavailable(
                f"COBALT_EXECUTOR_CGROUPS=required, but per-slot cgroups cannot be used: {exc}; "
                "run as root with cgroup v1, delegate a cgroup v2 subtree to the server, or "
                "set COBALT_EXECUTOR_CGROUPS=auto to run on rlimits and polls alone"
            ) from exc
        logger.warning(
            "no per-slot cgroups (%s): kernel memory (socket and pipe buffers) is not charged "
            "to tests, and slots sharing one uid share its process limit",
            exc,
        )
        return SlotCgroups(version=None, reason=str(exc))
    logger.info("per-slot cgroups (v%d) under %s", cgroups.version, cgroups.parents)
    return cgroups


_POOL_NUMBERS = itertools.count()


class _NoCgroups(Exception):
    """Why this host offers no usable cgroups."""


def _own_paths(membership: Path) -> dict[str, str]:
    """This process's cgroup path per v1 controller, and under "" its v2 path."""
    paths: dict[str, str] = {}
    for line in membership.read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def _create(slots: int, pids_max: int, root: Path, membership: Path) -> SlotCgroups:
    own = _own_paths(membership)
    # One tree per pool: a process may hold several pools (tests do), never sharing slots.
    name = f"cobalt-executor-{os.getpid()}-{next(_POOL_NUMBERS)}"
    if (root / "memory").is_dir() and (root / "pids").is_dir() and "memory" in own:
        memory = _make_dir(root / "memory" / own["memory"].lstrip("/") / name)
        try:
            pids = _make_dir(root / "pids" / own.get("pids", "/").lstrip("/") / name)
        except _NoCgroups:
            memory.rmdir()
            raise
        cgroups = SlotCgroups(version=1, parents=[memory, pids])
        for index in range(slots):
            slot = SlotCgroup(
                version=1,
                memory=_make_dir(memory / f"slot{index}"),
                pids=_make_dir(pids / f"slot{index}"),
            )
            cgroups.slots.append(slot)
            _write(slot.pids / "pids.max", str(pids_max))
            _write(slot.memory / "memory.use_hierarchy", "1", missing_ok=True)
            slot.test_memory = _make_dir(slot.memory / TEST_CGROUP)
        return cgroups
    if (root / "cgroup.controllers").is_file() and "" in own:
        own_dir = root / own[""].lstrip("/")
        if own_dir.name == _server_leaf_name():
            # An earlier pool of this process moved it here: the delegated cgroup is above.
            own_dir = own_dir.parent
        _delegate_v2_controllers(own_dir)
        parent = _make_dir(own_dir / name)
        try:
            _write(parent / "cgroup.subtree_control", V2_SUBTREE_CONTROL)
        except _NoCgroups:
            parent.rmdir()
            raise
        cgroups = SlotCgroups(version=2, parents=[parent])
        for index in range(slots):
            directory = _make_dir(parent / f"slot{index}")
            cgroups.slots.append(SlotCgroup(version=2, memory=directory, pids=directory))
            _write(directory / "pids.max", str(pids_max))
        return cgroups
    raise _NoCgroups(f"neither cgroup v1 memory+pids nor cgroup v2 is mounted at {root}")


V2_CONTROLLERS = frozenset({"memory", "pids"})
V2_SUBTREE_CONTROL = "+memory +pids"


def _server_leaf_name() -> str:
    """The leaf cgroup this server moves itself into (swept like the slot trees once the
    server is gone: the name carries its pid)."""
    return f"cobalt-executor-{os.getpid()}-server"


def _delegate_v2_controllers(own_dir: Path) -> None:
    """Make memory and pids available to the children of the server's cgroup `own_dir`.

    cgroup v2 lets a cgroup hand controllers to its children only while it holds no
    processes itself ("no internal processes"). systemd's `Delegate=yes` with the server
    in a leaf has done this already; a container whose cgroup tree is writable (its own
    cgroup namespace) has not, and holds the server itself. Then the server first moves
    itself into a leaf of its own, and only then enables the controllers. Nothing is
    touched when `own_dir` does not offer both controllers at all.
    """
    if V2_CONTROLLERS <= _words(own_dir / "cgroup.subtree_control"):
        return
    offered = _words(own_dir / "cgroup.controllers")
    missing = sorted(V2_CONTROLLERS - offered)
    if missing:
        raise _NoCgroups(
            f"the server's cgroup {own_dir} is not given the {' and '.join(missing)} "
            f"controller{'s' if len(missing) > 1 else ''} (its cgroup.controllers lists "
            f"{' '.join(sorted(offered)) or 'none'}); enable them in its parent's "
            "cgroup.subtree_control (systemd: Delegate=yes)"
        )
    leaf = _make_dir(own_dir / _server_leaf_name())
    _write(leaf / "cgroup.procs", "0")
    try:
        _write(own_dir / "cgroup.subtree_control", V2_SUBTREE_CONTROL)
    except _NoCgroups as exc:
        raise _NoCgroups(
            f"{own_dir} does not hand memory and pids to its children ({exc}); cgroup v2 "
            "allows that only while it holds no processes: the server moved itself to "
            f"{leaf.name}, so other processes remain there; start the server in a leaf "
            "cgroup of its own"
        ) from exc


def _words(path: Path) -> set[str]:
    try:
        return set(path.read_text().split())
    except OSError as exc:
        raise _NoCgroups(f"cannot read {path}: {exc.strerror}") from exc


def _sweep_stale(parent: Path) -> None:
    """Remove what an executor that died without cleaning up left under `parent` (empty
    `cobalt-executor-<pid>-<n>` trees whose pid is gone; a tree still in use stays)."""
    for stale in parent.glob("cobalt-executor-*"):
        pid = stale.name.split("-")[2]
        if not pid.isdigit() or int(pid) == os.getpid() or Path(f"/proc/{pid}").exists():
            continue
        try:
            for slot in stale.glob("slot*"):
                if (slot / TEST_CGROUP).is_dir():
                    (slot / TEST_CGROUP).rmdir()
                slot.rmdir()
            stale.rmdir()
            logger.info("removed the stale cgroup %s", stale)
        except OSError:
            pass


def _set_v1_limit(directory: Path, limit: int) -> None:
    # memsw (memory + swap) must stay >= the memory limit at every step, so the order of
    # the two writes depends on the direction; without it a jail could swap past its limit.
    memsw = directory / "memory.memsw.limit_in_bytes"
    current = int((directory / "memory.limit_in_bytes").read_text())
    if limit > current:
        _write(memsw, str(limit), missing_ok=True)
    _write(directory / "memory.limit_in_bytes", str(limit))
    if limit <= current:
        _write(memsw, str(limit), missing_ok=True)


def _make_dir(path: Path) -> Path:
    if path.name.startswith("cobalt-executor-"):
        _sweep_stale(path.parent)
    try:
        path.mkdir(exist_ok=True)
    except OSError as exc:
        reason = "not delegated to this user" if exc.errno in (errno.EACCES, errno.EPERM) else ""
        raise _NoCgroups(f"cannot create {path}: {exc.strerror} {reason}".strip()) from exc
    return path


def _write(path: Path, value: str, *, missing_ok: bool = False) -> None:
    try:
        path.write_text(value)
    except FileNotFoundError:
        if not missing_ok:
            raise _NoCgroups(f"{path} does not exist") from None
    except OSError as exc:
        raise _NoCgroups(f"cannot write {value!r} to {path}: {exc.strerror}") from exc
