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

import fcntl
import json
import logging
import os
import queue
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

from cobalt.executor.errors import SandboxUnavailable
from cobalt.executor.seccomp import seccomp_bpf, seccomp_memfd

__all__ = [
    "Interpreter",
    "RawRun",
    "SandboxConfig",
    "SandboxJob",
    "SandboxPool",
    "SandboxSlot",
    "describe_interpreter",
]

logger = logging.getLogger(__name__)

ZYGOTE_SOURCE = (Path(__file__).parent / "_zygote.py").read_text()
CONTROL_FD = 3
"""File descriptor number of the control socket inside the sandbox."""
SECCOMP_FD = 4
"""File descriptor number bubblewrap reads the seccomp program from."""
MAX_MESSAGE = 65536
DEFAULT_STDERR_CAP = 64 * 1024
"""Bytes of stderr kept per test; more than `output_kb` is an output_limit verdict."""
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
    max_tests_per_slot: int = 5000


@dataclass(frozen=True)
class Interpreter:
    """The Python that runs untrusted code, and what must be visible for it to start."""

    path: str
    version: str
    read_only_dirs: tuple[str, ...]
    symlinks: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class SandboxJob:
    """One test to run: the program, how to call it, and its limits."""

    code: str
    mode: Literal["stdin", "call"]
    stdin: bytes = b""
    fn_name: str = ""
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 4.0
    cpu_s: float = 4.0
    memory_mb: int = 1024
    output_bytes: int = 1 << 20


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
    slot_died: bool = False
    """The jail itself ended or stopped answering while this job ran."""
    started: bool = False
    """The harness wrote its start record: untrusted code may have run from here on."""

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


def bwrap_command(interpreter: Interpreter, config: SandboxConfig) -> list[str]:
    """The bubblewrap command line that starts one zygote."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not installed; run `make setup` or `apt-get install bubblewrap`"
        )
    cmd = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--die-with-parent",
        "--new-session",
        # The zygote is the namespace's init: no bwrap init a test could take over, and
        # nothing inside can kill or stop it.
        "--as-pid-1",
        "--hostname",
        "sandbox",
        "--clearenv",
    ]
    for key, value in SANDBOX_ENV.items():
        cmd += ["--setenv", key, value]
    for path in interpreter.read_only_dirs:
        cmd += ["--ro-bind", path, path]
    for target, link in interpreter.symlinks:
        cmd += ["--symlink", target, link]
    cmd += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
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
    return cmd + _zygote_argv(interpreter)


def _zygote_argv(interpreter: Interpreter) -> list[str]:
    return [interpreter.path, "-s", "-S", "-P", "-c", ZYGOTE_SOURCE, str(CONTROL_FD)]


class SandboxSlot:
    """One jail with one zygote; runs one test at a time.

    Not thread-safe: the pool hands each slot to one thread at a time.
    """

    def __init__(
        self, *, index: int, config: SandboxConfig, interpreter: Interpreter, seccomp: bytes
    ) -> None:
        self.index = index
        self.config = config
        self.interpreter = interpreter
        self._seccomp = seccomp
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
        try:
            argv = (
                bwrap_command(self.interpreter, self.config)
                if self.config.use_bwrap
                else _zygote_argv(self.interpreter)
                + [self._private_workroot(), "dedicated-uid" if self.uid else "shared-uid"]
            )
            uid = self.uid
            self._process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env={} if self.config.use_bwrap else self._unsafe_env(),
                preexec_fn=_child_setup(theirs.fileno(), seccomp_fd, self.config.use_bwrap),
                pass_fds=(CONTROL_FD, SECCOMP_FD),
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
        return {**SANDBOX_ENV, "HOME": root, "TMPDIR": root}

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
        command = json.dumps(
            {
                "nonce": nonce,
                "mode": job.mode,
                "code": job.code,
                "fn_name": job.fn_name,
                "args": job.args,
                "kwargs": job.kwargs,
                "limits": {
                    "cpu_s": max(1, int(job.cpu_s + 0.999)),
                    "memory_bytes": job.memory_mb << 20,
                    "fsize_bytes": self.config.file_size_mb << 20,
                    "nofile": self.config.nofile,
                    "nproc": self.config.nproc,
                },
            }
        ).encode()
        pipes = _TestPipes.open()
        try:
            socket.send_fds(
                self._control,
                [
                    json.dumps(
                        {"op": "run", "id": self._next_id, "memory_kb": job.memory_mb * 1024}
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
        self.tests_run += 1
        if raw.slot_died or self.tests_run >= self.config.max_tests_per_slot:
            self.close()
        return raw

    def _collect(self, job: SandboxJob, command: bytes, pipes: _TestPipes, raw: RawRun) -> None:
        control = self._control
        assert control is not None
        begin = time.monotonic()
        deadline = begin + job.wall_s
        kill_sent_at: float | None = None
        exited_at: float | None = None
        to_write = {pipes.cmd_w: memoryview(command), pipes.stdin_w: memoryview(job.stdin)}
        buffers = {
            pipes.stdout_r: bytearray(),
            pipes.stderr_r: bytearray(),
            pipes.result_r: bytearray(),
        }
        caps = {
            pipes.stdout_r: job.output_bytes,
            pipes.stderr_r: job.output_bytes,
            pipes.result_r: job.output_bytes + 4096,
        }
        kept = {pipes.stdout_r: job.output_bytes, pipes.stderr_r: DEFAULT_STDERR_CAP}
        seen = dict.fromkeys(buffers, 0)
        open_reads = set(buffers)
        poller = select.poll()
        for fd in to_write:
            poller.register(fd, select.POLLOUT)
        for fd in open_reads:
            poller.register(fd, select.POLLIN)
        poller.register(control.fileno(), select.POLLIN)

        def request_kill() -> None:
            nonlocal kill_sent_at
            if kill_sent_at is None:
                kill_sent_at = time.monotonic()
                try:
                    control.send(b'{"op": "kill"}')
                except OSError:
                    pass

        while True:
            now = time.monotonic()
            if exited_at is None and now >= deadline and kill_sent_at is None:
                raw.deadline_exceeded = True
                request_kill()
            if kill_sent_at is not None and exited_at is None:
                if now >= kill_sent_at + self.config.kill_grace_s:
                    raw.slot_died = True
                    self.close()
                    break
            if exited_at is not None and (not open_reads or now >= exited_at + 1.0):
                break
            if exited_at is not None:
                wait = exited_at + 1.0 - now
            elif kill_sent_at is not None:
                wait = kill_sent_at + self.config.kill_grace_s - now
            else:
                wait = deadline - now
            events = poller.poll(max(0.0, wait) * 1000 + 1)
            for fd, event in events:
                if fd == control.fileno():
                    message = b""
                    try:
                        message = control.recv(MAX_MESSAGE)
                    except OSError:
                        pass
                    if not message:
                        raw.slot_died = True
                        poller.unregister(fd)
                        exited_at = exited_at or time.monotonic()
                        self.close()
                        continue
                    reply = json.loads(message)
                    if reply.get("event") == "exited":
                        exited_at = time.monotonic()
                        raw.status = int(reply["status"])
                        raw.cpu_ms = reply["cpu_ns"] / 1e6
                        raw.wall_ms = reply["wall_ns"] / 1e6
                        raw.max_rss_kb = int(reply["maxrss_kb"])
                        raw.memory_exceeded = bool(reply.get("memory_exceeded"))
                elif fd in to_write:
                    if event & (select.POLLERR | select.POLLHUP):
                        poller.unregister(fd)
                        del to_write[fd]
                        os.close(fd)
                        pipes.forget(fd)
                        continue
                    view = to_write[fd]
                    try:
                        written = os.write(fd, view[: 1 << 16])
                    except BlockingIOError:
                        continue
                    except OSError:
                        written = len(view)
                    to_write[fd] = view = view[written:]
                    if not view:
                        poller.unregister(fd)
                        del to_write[fd]
                        os.close(fd)
                        pipes.forget(fd)
                elif fd in open_reads:
                    try:
                        chunk = os.read(fd, 1 << 16)
                    except BlockingIOError:
                        continue
                    if not chunk:
                        poller.unregister(fd)
                        open_reads.discard(fd)
                        continue
                    seen[fd] += len(chunk)
                    room = kept.get(fd, caps[fd]) - len(buffers[fd])
                    if room > 0:
                        buffers[fd] += chunk[:room]
                    if seen[fd] > caps[fd]:
                        raw.output_exceeded = True
                        request_kill()
        raw.stdout = bytes(buffers[pipes.stdout_r])
        raw.stderr = bytes(buffers[pipes.stderr_r])
        raw.record = bytes(buffers[pipes.result_r])
        raw.started = raw.record.startswith(f"{raw.nonce} start\n".encode())
        if raw.status is None and raw.wall_ms == 0.0:
            raw.wall_ms = (time.monotonic() - begin) * 1000


def _child_setup(control_fd: int, seccomp_fd: int, use_bwrap: bool) -> Any:
    """Runs in the forked child before exec: put the fds where the sandbox expects them."""
    unsafe_filter = None
    if not use_bwrap:
        from cobalt.executor.seccomp import build_filter

        unsafe_filter = build_filter()

    def setup() -> None:
        os.dup2(control_fd, CONTROL_FD)
        os.dup2(seccomp_fd, SECCOMP_FD)
        if unsafe_filter is not None:
            # Without bubblewrap, install the filter ourselves (it survives exec).
            unsafe_filter.load()

    return setup


@dataclass
class _TestPipes:
    """The five pipes of one test. Parent ends are non-blocking."""

    cmd_r: int
    cmd_w: int
    stdin_r: int
    stdin_w: int
    stdout_r: int
    stdout_w: int
    stderr_r: int
    stderr_w: int
    result_r: int
    result_w: int
    closed: set[int] = field(default_factory=set, init=False)

    @classmethod
    def open(cls) -> _TestPipes:
        fds: list[int] = []
        for _ in range(5):
            fds += os.pipe()
        pipes = cls(*fds)
        for fd in (pipes.cmd_w, pipes.stdin_w, pipes.stdout_r, pipes.stderr_r, pipes.result_r):
            flags = fcntl.fcntl(fd, fcntl.F_GETFL)
            fcntl.fcntl(fd, fcntl.F_SETFL, flags | os.O_NONBLOCK)
        return pipes

    def child_ends(self) -> list[int]:
        return [self.cmd_r, self.stdin_r, self.stdout_w, self.stderr_w, self.result_w]

    def close_child_ends(self) -> None:
        for fd in self.child_ends():
            self._close(fd)

    def forget(self, fd: int) -> None:
        self.closed.add(fd)

    def close_all(self) -> None:
        for fd in (
            self.cmd_r, self.cmd_w, self.stdin_r, self.stdin_w, self.stdout_r,
            self.stdout_w, self.stderr_r, self.stderr_w, self.result_r, self.result_w,
        ):  # fmt: skip
            self._close(fd)

    def _close(self, fd: int) -> None:
        if fd not in self.closed:
            self.closed.add(fd)
            try:
                os.close(fd)
            except OSError:
                pass


class SandboxPool:
    """A fixed set of slots shared by all requests; `run` blocks until a slot is free.

    Thread-safe. Dead or worn-out slots are restarted on their next use.
    """

    def __init__(self, config: SandboxConfig) -> None:
        if config.uid_base <= 0 and os.geteuid() == 0:
            raise SandboxUnavailable("refusing to run sandboxes as root: set a positive uid base")
        self.config = config
        self.interpreter = describe_interpreter(config.python)
        self._seccomp = seccomp_bpf()
        self.slots = [
            SandboxSlot(index=i, config=config, interpreter=self.interpreter, seccomp=self._seccomp)
            for i in range(config.slots)
        ]
        self._idle: queue.Queue[SandboxSlot] = queue.Queue()
        self._lock = threading.Lock()
        self.busy = 0
        self.restarts = 0

    def start(self) -> None:
        """Start every slot now, so the first request pays no start-up.

        Raises:
            SandboxUnavailable: a slot could not start (bubblewrap missing or broken).
        """
        for slot in self.slots:
            slot.start()
            self._idle.put(slot)
        if not self.config.use_bwrap:
            logger.critical(
                "UNSAFE: running untrusted code WITHOUT bubblewrap (no namespaces, host "
                "filesystem and network visible); only rlimits and seccomp apply"
            )
        logger.info(
            "sandbox pool ready: %d slots, python %s (%s), bwrap=%s",
            len(self.slots),
            self.interpreter.version,
            self.interpreter.path,
            self.config.use_bwrap,
        )

    def run(self, job: SandboxJob) -> RawRun:
        """Run a job on the next free slot; retry once on a fresh jail if it never started."""
        slot = self._idle.get()
        with self._lock:
            self.busy += 1
        try:
            raw = self._run_on(slot, job)
            if raw.slot_died and not raw.started:
                logger.warning("slot %d failed before the test started; retrying", slot.index)
                raw = self._run_on(slot, job)
            return raw
        finally:
            with self._lock:
                self.busy -= 1
            self._idle.put(slot)

    def _run_on(self, slot: SandboxSlot, job: SandboxJob) -> RawRun:
        if not slot.is_alive():
            with self._lock:
                self.restarts += 1
            try:
                slot.start()
            except SandboxUnavailable:
                logger.exception("slot %d could not restart", slot.index)
                return RawRun(nonce="", slot_died=True)
        return slot.run(job)

    def live_pids(self) -> set[int]:
        """Host pids of the jails (bwrap processes) currently running."""
        return {slot.pid for slot in self.slots if slot.pid is not None and slot.is_alive()}

    def sandbox_uids(self) -> set[int]:
        """The uids jails run as (empty when the server is not root and keeps its own)."""
        return {slot.uid for slot in self.slots if slot.uid is not None}

    def close(self) -> None:
        for slot in self.slots:
            slot.close()
