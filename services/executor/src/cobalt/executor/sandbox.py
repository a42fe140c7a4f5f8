"""Sandboxes: one bubblewrap jail per slot, each holding a warm zygote that forks per test.

A slot is started once and reused: bubblewrap unshares every namespace (user, PID, mount,
network, IPC, UTS, cgroup), mounts a read-only root with only the interpreter and the
libraries it loads, a fresh /proc, a minimal /dev and a size-capped tmpfs, clears the
environment and installs the seccomp filter. It runs as its own unprivileged uid (one uid
per slot, so a fork bomb in one slot cannot starve another). Inside, `_zygote.py` forks a
child per test; the child sets its own rlimits before any untrusted code runs.

The server side here (`SandboxSlot.run`) owns the clock: it feeds stdin, drains stdout,
stderr and the harness record concurrently into bounded buffers, asks the zygote to kill
the test at the deadline, and kills the whole jail if the zygote does not answer. It
returns raw evidence (`RawRun`); `judge.py` turns that into a verdict.
"""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import os
import secrets
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from cobalt.executor.cgroups import CgroupMode, SlotCgroup
from cobalt.executor.errors import SandboxUnavailable
from cobalt.executor.interpreter import Interpreter
from cobalt.executor.jail_view import empty_file, masked_activity_files, minimal_dev
from cobalt.executor.presets import checker_payload, harness_payload, with_prior_calls
from cobalt.executor.seccomp import seccomp_memfd
from cobalt.executor.streams import JobPipes, JobStreams
from cobalt.executor.values import dumps_value

__all__ = [
    "SANDBOX_ENV",
    "RawRun",
    "SandboxConfig",
    "SandboxJob",
    "SandboxSlot",
    "bwrap_command",
]

logger = logging.getLogger(__name__)

ZYGOTE_SOURCE = (Path(__file__).parent / "_zygote.py").read_text()
CONTROL_FD = 3
"""File descriptor number of the control socket inside the sandbox."""
SECCOMP_FD = 4
"""File descriptor number bubblewrap reads the seccomp program from."""
TEST_CGROUP_FD = 5
"""File descriptor number, inside the sandbox, that moves a process into the slot's test
cgroup (cgroups.py, `SlotCgroup.open_test_procs`); the zygote's alone."""
MAX_MESSAGE = 65536
ABANDONED_CHECK_S = 0.2
"""How often a running test checks whether its request was abandoned (then it is killed)."""
SANDBOX_ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "TZ": "UTC",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    # Deterministic hashing makes set and dict iteration (and so output) repeatable.
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


@dataclass(frozen=True)
class SandboxConfig:
    """How sandboxes are built. Made from `ExecutorSettings` at the composition root."""

    python: str = "/usr/bin/python3"
    use_bwrap: bool = True
    uid_base: int = 61000
    slots: int = 2
    tmpfs_mb: int = 64
    nproc: int = 64
    nofile: int = 256
    file_size_mb: int = 64
    kill_grace_s: float = 1.0
    start_timeout_s: float = 15.0
    reset_timeout_s: float = 5.0
    """How long a jail may take to reset after a test before it is replaced."""
    max_tests_per_slot: int = 5000
    cgroups: CgroupMode = "auto"
    languages: str = "all"
    """Languages offered besides Python (`languages.offered_toolchains`)."""
    python_packages: str = ""
    """A directory of third-party packages Python programs may import ("": none)."""
    python_preload: tuple[str, ...] = ()
    """Modules the zygote imports once, so that tests importing them pay nothing."""


@dataclass(frozen=True)
class SandboxJob:
    """One test to run: the program, how to call it, and its limits."""

    code: str
    mode: Literal["stdin", "call", "check", "exec", "compile"]
    """Python's three test kinds, or another language's: `exec` runs `argv` (a compiled
    program or a runtime on its source), `compile` runs the compiler (`argv`) once per
    request and reports the `artifacts` it left (languages.py)."""
    stdin: bytes = b""
    """The program's input; for a check test, the check's source (read by the check
    process only, after the program's process has let go of stdin)."""
    fn_name: str = ""
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 4.0
    cpu_s: float = 4.0
    memory_mb: int = 1024
    output_bytes: int = 1 << 20
    abandoned: threading.Event | None = None
    """Set when nobody waits for the result any more (the client went away): the running
    test is stopped."""
    preset: str = ""
    """The judge preset, for the check harness (how the program runs)."""
    harnessed: bool = False
    """`code` is a preset harness's trailer (`presets.harnessed_program`): the harness runs
    in its namespace first."""
    argv: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    files: tuple[tuple[str, bytes, int], ...] = ()
    """(relative path, contents, mode) written into the test's working directory first."""
    artifacts: tuple[str, ...] = ()
    address_space_mb: int = 0
    """`exec` and `compile`: RLIMIT_AS beyond `memory_mb` (the runtime's reservations)."""
    record_bytes: int = 0
    """Cap on the harness record (0: `output_bytes` and a little more); a compilation's
    record carries what the compiler made."""
    prior_calls: tuple[bytes, ...] = ()
    """`lcb` call tests: the earlier calls to replay (`program_memory.LcbReplay`)."""


@dataclass
class RawRun:
    """What the sandbox observed for one job, before any judging."""

    nonce: str
    status: int | None = None
    """Raw wait status of the test process, as reported by the zygote."""
    cpu_ms: float = 0.0
    wall_ms: float = 0.0
    max_rss_kb: int = 0
    stdout: bytes = b""
    stderr: bytes = b""
    record: bytes = b""
    deadline_exceeded: bool = False
    output_exceeded: bool = False
    memory_exceeded: bool = False
    """The test's processes together held more than its memory limit."""
    cpu_exceeded: bool = False
    """The test's processes together used more CPU time than its limit."""
    slot_died: bool = False
    """The jail itself ended or stopped answering while this job ran."""
    handover_ms: float = 0.0
    """From sending the job to the zygote's "running": the jail's reset after the previous
    test and the fork of this one's process, on the server's time (not the test's)."""
    started: bool = False
    """The zygote saw the harness start: untrusted code may have run from here on. Only
    the trusted side says so; nothing the program can reach decides it."""

    @property
    def exit_code(self) -> int | None:
        if self.status is None or not os.WIFEXITED(self.status):
            return None
        return os.WEXITSTATUS(self.status)

    @property
    def signal(self) -> int | None:
        if self.status is None or not os.WIFSIGNALED(self.status):
            return None
        return os.WTERMSIG(self.status)


def bwrap_command(
    interpreter: Interpreter,
    config: SandboxConfig,
    test_filter: bytes = b"",
    *,
    test_cgroup: bool = False,
) -> list[str]:
    """The bubblewrap command line that starts one zygote (`test_cgroup`: it holds
    `TEST_CGROUP_FD`)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed; run `make setup` or `apt-get install bubblewrap`"
        )
    cmd = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--die-with-parent",
        "--new-session",
        # The zygote is the namespace's init: no bwrap init a test could take over, and
        # nothing inside can kill or stop it.
        "--as-pid-1",
        "--hostname",
        "sandbox",
        "--clearenv",
        # The zygote's only privileges, in the jail's own user namespace: resetting its PID
        # namespace's pid counter before each test, replacing the jail's own tmpfs mounts
        # after each (the seccomp filter allows no other mount), and (once, at start)
        # setting that user namespace's limit on new user namespaces to 0. It drops the
        # last at once, and every test process drops all of them before running anything
        # (see _zygote.py).
        "--cap-add",
        "CAP_CHECKPOINT_RESTORE",
        "--cap-add",
        "CAP_SYS_ADMIN",
        "--cap-add",
        "CAP_SYS_RESOURCE",
    ]
    for key, value in {**SANDBOX_ENV, **python_packages_env(config)}.items():
        cmd += ["--setenv", key, value]
    if config.python_packages:
        cmd += ["--ro-bind", config.python_packages, config.python_packages]
        # Debian's numpy finds its BLAS through /etc/alternatives symlinks; pandas (pytz)
        # reads the time zone database.
        for path in ("/etc/alternatives", "/usr/share/zoneinfo"):
            cmd += ["--ro-bind-try", path, path]
    for path in interpreter.read_only_dirs:
        cmd += ["--ro-bind", path, path]
    for source, target in interpreter.toolchain_binds:
        cmd += ["--ro-bind", source, target]
    for target, link in interpreter.symlinks:
        cmd += ["--symlink", target, link]
    cmd += ["--proc", "/proc"]
    for path in masked_activity_files():
        cmd += ["--ro-bind", empty_file(), path]
    cmd += minimal_dev()
    cmd += [
        "--size",
        str(config.tmpfs_mb << 20),
        "--tmpfs",
        "/tmp",
        "--size",
        str(config.tmpfs_mb << 20),
        "--tmpfs",
        "/dev/shm",
        "--chdir",
        "/tmp",
        "--remount-ro",
        "/",
        "--remount-ro",
        "/dev",
        "--seccomp",
        str(SECCOMP_FD),
        "--",
    ]
    return cmd + _zygote_argv(interpreter, test_filter, test_cgroup)


def _zygote_argv(interpreter: Interpreter, test_filter: bytes, test_cgroup: bool) -> list[str]:
    # argv[2]: the per-test seccomp filter, which each pre-forked child installs on itself;
    # argv[3]: the descriptor that moves a test's process into its cgroup, or -1.
    source = ZYGOTE_SOURCE
    cgroup_fd = str(TEST_CGROUP_FD if test_cgroup else -1)
    return [
        interpreter.path,
        *("-s", "-S", "-P", "-c", source),
        *(str(CONTROL_FD), test_filter.hex(), cgroup_fd),
    ]


class SandboxSlot:
    """One jail with one zygote; runs one test at a time.

    Not thread-safe: the pool hands each slot to one thread at a time.
    """

    def __init__(
        self,
        *,
        index: int,
        config: SandboxConfig,
        interpreter: Interpreter,
        seccomp: bytes,
        test_filter: bytes = b"",
        cgroup: SlotCgroup | None = None,
        pipe_budget: int = 0,
    ) -> None:
        self.index = index
        self.pipe_budget = pipe_budget
        """Pipes one test may create (0: no bound); see `pool.shared_uid_pipe_budget`."""
        self.cgroup = cgroup
        """The slot's own cgroup, or None when the host offers none."""
        self.config = config
        self.interpreter = interpreter
        self._seccomp = seccomp
        self._test_filter = test_filter
        self._process: subprocess.Popen[bytes] | None = None
        self._control: socket.socket | None = None
        self._next_id = 0
        self.tests_run = 0
        self.restarts = 0
        self.zygote_info: dict[str, Any] = {}
        self._workroot: str | None = None

    @cached_property
    def uid(self) -> int | None:
        """The uid the jail runs as, or None to keep ours (when we are not root)."""
        if os.geteuid() != 0:
            return None
        return self.config.uid_base + self.index

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def is_alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the jail and wait until its zygote says it is ready.

        Raises:
            SandboxUnavailable: the jail did not start or the zygote did not answer.
        """
        self.close()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        seccomp_fd = seccomp_memfd(self._seccomp)
        test_procs = self.cgroup.open_test_procs() if self.cgroup is not None else None
        if test_procs is not None:
            # Above the numbers the child's dup2s fill (3-5), so that none overwrites it.
            test_procs, low = fcntl.fcntl(test_procs, fcntl.F_DUPFD_CLOEXEC, 10), test_procs
            os.close(low)
        test_cgroup = test_procs is not None
        try:
            argv = (
                bwrap_command(
                    self.interpreter, self.config, self._test_filter, test_cgroup=test_cgroup
                )
                if self.config.use_bwrap
                else _zygote_argv(self.interpreter, self._test_filter, test_cgroup)
                + [self._private_workroot(), "dedicated-uid" if self.uid else "shared-uid"]
            )
            uid = self.uid
            if self.cgroup is not None and uid is not None:
                self.cgroup.grant(uid)
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env={} if self.config.use_bwrap else self._unsafe_env(),
                preexec_fn=_child_setup(
                    theirs.fileno(), seccomp_fd, self.config.use_bwrap, self.cgroup, test_procs
                ),
                pass_fds=(CONTROL_FD, SECCOMP_FD, *([TEST_CGROUP_FD] if test_cgroup else [])),
                user=uid,
                group=uid,
                extra_groups=[] if uid is not None else None,
                cwd="/",
                start_new_session=True,
            )
        except OSError as exc:
            ours.close()
            raise SandboxUnavailable(f"cannot start sandbox: {exc}") from exc
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
            os.close(seccomp_fd)
            if test_procs is not None:
                os.close(test_procs)
        self._control = ours
        ready, _, _ = select.select([ours], [], [], self.config.start_timeout_s)
        message = ours.recv(MAX_MESSAGE) if ready else b""
        if not message:
            code = self._process.poll()
            self.close()
            raise SandboxUnavailable(
                f"sandbox slot {self.index} did not start (exit status {code}); "
                "check that bubblewrap works and user namespaces are allowed"
            )
        self.zygote_info = json.loads(message)
        self.tests_run = 0

    def _private_workroot(self) -> str:
        """Unsafe mode only: a directory of this slot's own to write in and wipe."""
        if self._workroot is None:
            self._workroot = tempfile.mkdtemp(prefix=f"cobalt-slot{self.index}-")
            if self.uid is not None:
                os.chown(self._workroot, self.uid, self.uid)
        return self._workroot

    def _unsafe_env(self) -> dict[str, str]:
        root = self._private_workroot()
        return {**SANDBOX_ENV, **python_packages_env(self.config), "HOME": root, "TMPDIR": root}

    def close(self) -> None:
        """Stop the jail: SIGKILL its process group, which bwrap's PID namespace follows."""
        if self._control is not None:
            self._control.close()
            self._control = None
        if self._process is not None:
            if self._process.poll() is None:
                try:
                    os.killpg(self._process.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    self._process.kill()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                logger.error("sandbox slot %d did not exit after SIGKILL", self.index)
            self._process = None
        if self._workroot is not None:
            shutil.rmtree(self._workroot, ignore_errors=True)
            self._workroot = None

    def run(self, job: SandboxJob) -> RawRun:
        """Run one job and collect the evidence. Never raises for program behaviour."""
        if not self.is_alive() or self._control is None:
            self.start()
        assert self._control is not None
        self._next_id += 1
        nonce = secrets.token_hex(16)
        raw = RawRun(nonce=nonce)
        if not self._prepare_cgroup(job):
            raw.slot_died = True
            return raw
        command = dumps_value(
            {
                "nonce": nonce,
                "mode": job.mode,
                "code": job.code,
                "fn_name": job.fn_name,
                "args": job.args,
                "kwargs": job.kwargs,
                "preset": job.preset,
                **_native_payload(job),
                **(checker_payload(self.interpreter.version) if job.mode == "check" else {}),
                **(harness_payload(self.interpreter.version) if job.harnessed else {}),
                "limits": {
                    "cpu_s": max(1, int(job.cpu_s + 0.999)),
                    "memory_bytes": job.memory_mb << 20,
                    "fsize_bytes": self.config.file_size_mb << 20,
                    "nofile": self.config.nofile,
                    "nproc": self.config.nproc,
                    "address_space_bytes": (job.memory_mb + job.address_space_mb) << 20,
                },
            }
        ).encode()
        command = with_prior_calls(command, job.prior_calls)
        pipes = JobPipes.open()
        try:
            socket.send_fds(
                self._control,
                [
                    json.dumps(
                        {
                            "op": "run",
                            "id": self._next_id,
                            "memory_kb": job.memory_mb * 1024,
                            "cpu_ms": max(1, round(job.cpu_s * 1000)),
                            "pipes": self.pipe_budget,
                        }
                    ).encode()
                ],
                pipes.child_ends(),
            )
        except OSError:
            pipes.close_all()
            self.close()
            raw.slot_died = True
            return raw
        pipes.close_child_ends()
        try:
            self._collect(job, command, pipes, raw)
        finally:
            pipes.close_all()
        if self.cgroup is not None and self.cgroup.oom_killed_since_prepare():
            # The kernel charged the jail past the test's memory (kernel memory included) and
            # killed in it. Only the test's own use can do that: the harness, the zygote and
            # their headroom fit the limit, and the test's processes are the OOM killer's
            # first choice. So it is the program's verdict, even if the jail went down.
            raw.memory_exceeded = True
            raw.started = True
        self.tests_run += 1
        if raw.slot_died or self.tests_run >= self.config.max_tests_per_slot:
            self.close()
        return raw

    def _prepare_cgroup(self, job: SandboxJob) -> bool:
        """Set the jail's cgroup limit for this job; False if even a fresh jail cannot have it."""
        if self.cgroup is None:
            return True
        try:
            self.cgroup.prepare(job.memory_mb)
            return True
        except SandboxUnavailable:
            # Lowering the limit below what the jail holds failed: a fresh jail holds less.
            self.start()
        try:
            self.cgroup.prepare(job.memory_mb)
            return True
        except SandboxUnavailable:
            logger.exception("slot %d: cannot set its cgroup memory limit", self.index)
            return False

    def _collect(self, job: SandboxJob, command: bytes, pipes: JobPipes, raw: RawRun) -> None:
        """Feed the test, drain its output, and enforce its deadline until it has ended."""
        control = self._control
        assert control is not None
        io = JobStreams(pipes, command, job)
        io.poller.register(control.fileno(), select.POLLIN)
        sent_at = begin = time.monotonic()
        # Until the zygote says "running" it is resetting the jail after the previous test
        # (and forking this one's process): bounded on its own, and not this test's time.
        handover_by = sent_at + self.config.reset_timeout_s
        deadline: float | None = None
        kill_sent_at: float | None = None
        exited_at: float | None = None
        while True:
            now = time.monotonic()
            abandoned = job.abandoned is not None and job.abandoned.is_set()
            if deadline is None and exited_at is None and now >= handover_by:
                logger.warning(
                    "slot %d did not reset within %g s after its last test; replacing its jail",
                    self.index,
                    self.config.reset_timeout_s,
                )
                raw.slot_died = True  # not started: the pool retries on a fresh jail
                self.close()
                break
            overdue = deadline is not None and now >= deadline
            if (
                exited_at is None
                and kill_sent_at is None
                and (overdue or io.overflowed or abandoned)
            ):
                raw.deadline_exceeded = overdue
                raw.output_exceeded = io.overflowed
                kill_sent_at = now
                self._send_quietly(b'{"op": "kill"}')
            if exited_at is None and kill_sent_at is not None:
                if now >= kill_sent_at + self.config.kill_grace_s:
                    raw.slot_died = True  # the zygote did not answer: kill the whole jail
                    self.close()
                    break
                wait = kill_sent_at + self.config.kill_grace_s - now
            elif exited_at is not None:
                # The test is over; its pipes close as soon as everything in it is dead.
                if io.drained or now >= exited_at + 1.0:
                    break
                wait = exited_at + 1.0 - now
            else:
                wait = (deadline if deadline is not None else handover_by) - now
                if job.abandoned is not None:
                    wait = min(wait, ABANDONED_CHECK_S)
            for fd, event in io.poller.poll(max(0.0, wait) * 1000 + 1):
                if fd != control.fileno():
                    io.handle(fd, event)
                    continue
                reply = self._receive_quietly()
                if reply is None:
                    raw.slot_died = True
                    io.poller.unregister(fd)
                    exited_at = exited_at or time.monotonic()
                    self.close()
                elif reply.get("event") == "running":
                    # The test's clock starts now: the jail's reset after the previous
                    # test and the fork of this one's process were the server's time.
                    begin = time.monotonic()
                    raw.handover_ms = (begin - sent_at) * 1000
                    deadline = begin + job.wall_s
                elif reply.get("event") == "exited":
                    raw.started = bool(reply.get("started"))
                    exited_at = time.monotonic()
                    raw.status = int(reply["status"])
                    raw.cpu_ms = reply["cpu_ns"] / 1e6
                    raw.wall_ms = reply["wall_ns"] / 1e6
                    raw.max_rss_kb = int(reply["maxrss_kb"])
                    raw.memory_exceeded = bool(reply.get("memory_exceeded"))
                    raw.cpu_exceeded = bool(reply.get("cpu_exceeded"))
        raw.output_exceeded = raw.output_exceeded or io.overflowed
        raw.stdout, raw.stderr, raw.record = io.outputs()
        if raw.status is None and raw.wall_ms == 0.0:
            raw.wall_ms = (time.monotonic() - begin) * 1000

    def _send_quietly(self, message: bytes) -> None:
        try:
            if self._control is not None:
                self._control.send(message)
        except OSError:
            pass  # the jail is gone; the caller notices on its next receive

    def _receive_quietly(self) -> dict[str, Any] | None:
        """The zygote's next message, or None if the jail has gone away."""
        try:
            message = self._control.recv(MAX_MESSAGE) if self._control is not None else b""
        except OSError:
            message = b""
        if not message:
            return None
        reply: dict[str, Any] = json.loads(message)
        return reply


def python_packages_env(config: SandboxConfig) -> dict[str, str]:
    """The jail's environment for the optional package set: its directory on Python's
    path (the zygote runs without site, so dist-packages is not there otherwise) and the
    modules the zygote imports before it forks tests."""
    env: dict[str, str] = {}
    if config.python_packages:
        env["PYTHONPATH"] = config.python_packages
    if config.python_preload:
        env["COBALT_PRELOAD"] = ",".join(config.python_preload)
    return env


def _native_payload(job: SandboxJob) -> dict[str, Any]:
    """The command fields of the files to write first (any mode; see
    `_zygote._write_files`) and of another language's compile or run."""
    payload: dict[str, Any] = {}
    if job.files:
        payload["files"] = [
            [name, base64.b64encode(contents).decode(), mode] for name, contents, mode in job.files
        ]
    if job.mode in ("exec", "compile"):
        payload.update(argv=list(job.argv), env=job.env, artifacts=list(job.artifacts))
    return payload


def _child_setup(
    control_fd: int,
    seccomp_fd: int,
    use_bwrap: bool,
    cgroup: SlotCgroup | None,
    test_procs: int | None = None,
) -> Any:
    """Runs in the forked child before exec: join the slot's cgroup (so that everything the
    jail ever starts is charged to it) and put the fds where the sandbox expects them."""
    unsafe_filter = None
    if not use_bwrap:
        from cobalt.executor.seccomp import build_filter

        unsafe_filter = build_filter()

    def setup() -> None:
        if cgroup is not None:
            cgroup.enter_self()
        os.dup2(control_fd, CONTROL_FD)
        os.dup2(seccomp_fd, SECCOMP_FD)
        if test_procs is not None:
            os.dup2(test_procs, TEST_CGROUP_FD)
        if unsafe_filter is not None:
            # Without bubblewrap, install the filter ourselves (it survives exec).
            unsafe_filter.load()

    return setup
