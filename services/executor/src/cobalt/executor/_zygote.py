"""The warm interpreter that lives inside one sandbox and forks once per test.

This file is not imported by the server: its text is passed to the sandbox's Python with
`-c`, so it may use the standard library only and must not rely on the project being
visible inside the sandbox (it is not).

Protocol, over an AF_UNIX SOCK_SEQPACKET socket inherited as fd `argv[1]`:

    server -> zygote  {"op": "run", "id": N} with five fds attached (SCM_RIGHTS):
                      command pipe (read end), stdin (read end), stdout, stderr and
                      result pipes (write ends)
                      {"op": "kill"}   kill the running test and everything it started
                      {"op": "exit"}   shut down
    zygote -> server  {"event": "ready", ...} once, then per test
                      {"event": "exited", "id": N, "status": S, "started": bool, ...}

The forked child reads its command (program, mode, limits, nonce) from the command pipe,
sets its own resource limits, tells the zygote "started" on its private socket (closed
before any untrusted code runs), and at the end writes "<nonce> {status json}" followed
by the serialized return value for call tests to fd 3 (the result pipe).
Verdicts are decided by the server from these records and the exit status the zygote
reports; nothing the program prints on stdout can pass for a record.

The zygote never runs untrusted code itself, marks itself non-dumpable (so processes of
the same uid cannot read or write its memory or fds through /proc), and after each test
kills every other process in its PID namespace and wipes the writable directories, so
no test can see or influence the next one. In a jail, "wiped" means replaced: the
writable tmpfs mounts are unmounted and fresh ones mounted in their place, so nothing a
test did to them (files, ACLs, xattrs, times, modes, the inode counter) survives it.
The zygote then forks the next test's process; when it hands a test to that process it
says {"event": "running", "id": N}, and the server starts the test's clock only then.
"""

# Modules solutions commonly use, imported once here so that forked tests pay nothing.
# ast, datetime, shutil, statistics and subprocess are what the lcb and humaneval judge
# presets' harness (_preset_harness.py) imports or pre-imports for every test.
import ast  # noqa: F401
import binascii
import bisect  # noqa: F401
import builtins
import collections  # noqa: F401
import copy  # noqa: F401
import ctypes
import datetime  # noqa: F401
import decimal  # noqa: F401
import errno
import fcntl
import fractions  # noqa: F401
import functools  # noqa: F401
import gc
import heapq  # noqa: F401
import io
import itertools  # noqa: F401
import json
import linecache
import marshal
import math  # noqa: F401
import operator  # noqa: F401
import os
import random  # noqa: F401
import re  # noqa: F401
import resource
import select
import shutil  # noqa: F401
import signal
import socket
import statistics  # noqa: F401
import string  # noqa: F401
import struct
import subprocess  # noqa: F401
import sys
import threading
import time
import traceback
import typing
from typing import Any, NoReturn

WRITABLE_DIRS: tuple[str, ...] = ("/tmp", "/dev/shm")
"""What tests may write: tmpfs mounts replaced after each test. Without a jail (unsafe
mode) this is the private directory the server made for the slot, never the host's /tmp,
and it is wiped instead."""
WORKDIR = "/tmp/run"
HIGH_FD = 100
RECORD_FD = 3
COMMAND_FD = 4
STARTED_FD = 5
MAX_MESSAGE = 65536
WARM_UP_AFTER_IDLE_S = 0.005
"""A spare warms up only after this long without a test (see `_warm_up`)."""
MEMORY_POLL_MS = 50
"""How often a running test's total memory (all its processes) is checked."""
PR_SET_DUMPABLE = 4


def _send(ctl: socket.socket, payload: dict[str, Any]) -> None:
    ctl.send(json.dumps(payload).encode())


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


LINUX_CAPABILITY_VERSION_3 = 0x20080522
CAP_SYS_ADMIN = 21
CAP_CHECKPOINT_RESTORE = 40
MS_NOSUID = 2
MS_NODEV = 4
MNT_DETACH = 2
PID_COUNTER = "/proc/sys/kernel/ns_last_pid"
PID_COUNTER_FD = -1
"""The jail's pid counter, open for writing (bwrap mode only; -1 otherwise)."""
USER_NAMESPACE_LIMIT = "/proc/sys/user/max_user_namespaces"


def _keep_capabilities(*caps: int) -> None:
    """Reduce this process's capabilities to `caps` (none: a test process).

    Lowering is always allowed, so this cannot fail for want of privilege. A test never
    execs with more: no-new-privs is set and its uid is not 0 in the jail.
    """
    data = (_CapData * 2)()
    for cap in caps:
        data[cap // 32].effective |= 1 << (cap % 32)
        data[cap // 32].permitted |= 1 << (cap % 32)
    header = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    if _LIBC.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _lock_jail_namespaces() -> None:
    """Take the steps bwrap's `--disable-userns` would, and keep only the pid counter.

    bwrap implements `--disable-userns` with a nested user namespace, where our
    capabilities would not reach the PID namespace (see `minimal_dev` in jail_view.py).
    So instead: no process of the jail's user namespace may create another (the limit is
    per namespace, and raising it again needs CAP_SYS_RESOURCE, which we drop here; tests
    never had it), and the seccomp filter denies unshare and clone with namespace flags
    on top. What stays is CAP_CHECKPOINT_RESTORE, to reset the pid counter, and
    CAP_SYS_ADMIN, to replace the jail's own tmpfs mounts after each test (the jail's
    seccomp filter allows only that mount call; see seccomp.py).
    """
    global PID_COUNTER_FD
    with open(USER_NAMESPACE_LIMIT, "w") as limit:
        limit.write("0")
    _keep_capabilities(CAP_CHECKPOINT_RESTORE, CAP_SYS_ADMIN)
    fd = os.open(PID_COUNTER, os.O_WRONLY | os.O_CLOEXEC)
    PID_COUNTER_FD = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 60)
    os.close(fd)
    _reset_pid_counter()


def _reset_pid_counter() -> None:
    """Make the next fork get pid 2, as the first test of a fresh jail does.

    Pids in a PID namespace are handed out in order, so without this a test's pid (and
    its children's) would tell it how many processes earlier tests on this slot started.
    Every other process of the jail has been killed and reaped by now, so pid 2 is free
    (if one is not, the kernel takes the next free pid: no failure, only less steady).
    """
    if PID_COUNTER_FD >= 0:
        os.pwrite(PID_COUNTER_FD, b"1", 0)


def _make_non_dumpable() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


KILL_ALL = True
"""Whether kill(-1) reaches only processes of this sandbox (see main)."""


def _in_own_pid_namespace() -> bool:
    # bwrap starts us as the namespace's init (--as-pid-1). Only then is kill(-1) confined
    # to the sandbox; in unsafe mode (no namespaces) it would hit every process of our uid.
    # Being init also protects us: signals sent from inside the namespace cannot kill or
    # stop its init, and nothing else can become init and outlive the jail.
    return os.getpid() == 1


# --- the child: runs one test ---------------------------------------------------------


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _prefer_for_oom_kill() -> None:
    # Under a slot's cgroup limit the kernel must kill the test, never the zygote (whose
    # death would look like the sandbox's fault). Raising one's own score needs no
    # privilege, but a non-dumpable process's /proc files belong to root: dumpable for the
    # one write, then back to the zygote's state.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)
    try:
        with open("/proc/self/oom_score_adj", "w") as score:
            score.write("1000")
    except OSError:
        pass
    finally:
        _make_non_dumpable()


def _apply_limits(limits: dict[str, int], mapped: int) -> None:
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    # The address-space limit counts what is already mapped (the interpreter itself), so
    # add that: the program then gets `memory_bytes` for its own data.
    memory = mapped + int(limits["memory_bytes"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    stack = min(int(limits["memory_bytes"]), 512 << 20)
    resource.setrlimit(resource.RLIMIT_STACK, (stack, stack))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["fsize_bytes"], limits["fsize_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["nofile"], limits["nofile"]))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits["nproc"], limits["nproc"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (0, 0))


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


_LIBC = ctypes.CDLL(None, use_errno=True)
"""Loaded once here; forked tests inherit it."""
TEST_FILTER = b""
HANDOVER_FILTER = b""
"""Stacked by the test's process after it handed its notification fd over (no sendmsg)."""
"""The per-test seccomp filter (argv[2]); each pre-forked child installs it on itself
right after its own setsid, before it waits for its test."""


SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}.get(os.uname().machine, -1)
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_NEW_LISTENER = 8
SECCOMP_IOCTL_NOTIF_RECV = 0xC0502100
SECCOMP_IOCTL_NOTIF_SEND = 0xC0182101
SECCOMP_USER_NOTIF_FLAG_CONTINUE = 1
NOTIF_BYTES = 80
"""sizeof(struct seccomp_notif): id, pid, flags, then struct seccomp_data."""


def _split_filters(framed: bytes) -> tuple[bytes, bytes]:
    """The test filter and the handover filter (`seccomp.per_test_seccomp_bpf`'s framing)."""
    if len(framed) < 4:
        return b"", b""
    size = int.from_bytes(framed[:4], "little")
    return framed[4 : 4 + size], framed[4 + size :]


def _install_test_filter(program: bytes, listen: bool = True) -> int:
    """Stack the server's per-test seccomp filter (no setsid, no inotify) on this process.

    The jail's filter must allow what the zygote itself does (setsid for each test); this
    one covers only the test and what it starts. No-new-privs is already set. Returns the
    filter's notification fd (-1 without one): where slots share one uid the filter asks
    whoever holds it before each pipe the test creates (see `_answer_pipe_request`).
    """
    if not program:
        return -1
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    if SYS_SECCOMP < 0:
        if _LIBC.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "installing the test's seccomp filter failed")
        return -1
    listener = _LIBC.syscall(
        SYS_SECCOMP,
        SECCOMP_SET_MODE_FILTER,
        SECCOMP_FILTER_FLAG_NEW_LISTENER if listen else 0,
        ctypes.byref(fprog),
    )
    if listener < 0:
        raise OSError(ctypes.get_errno(), "installing the test's seccomp filter failed")
    return int(listener) if listen else -1


def _answer_pipe_request(listener: int, budget: int, created: int) -> int:
    """Answer one test process waiting to create a pipe; returns the pipes created so far.

    Slots that share a host uid share its pipe quota (`fs.pipe-user-pages-soft`): past it,
    every new pipe of that uid, a neighbour's included, holds 8 KiB instead of 64. So a
    test may create at most `budget` pipes (the server's share of the quota per slot;
    none may grow past 64 KiB), and the next fails with EMFILE, as if out of descriptors.
    Counting creations, not live pipes, keeps the verdict independent of timing.
    """
    notification = bytearray(NOTIF_BYTES)
    try:
        fcntl.ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, notification, True)
    except OSError:
        return created  # the caller died meanwhile
    request_id = int.from_bytes(notification[:8], "little")
    allowed = budget <= 0 or created < budget
    error = 0 if allowed else -errno.EMFILE
    flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE if allowed else 0
    reply = bytearray(struct.pack("=QqiI", request_id, 0, error, flags))
    try:
        fcntl.ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, reply, True)
    except OSError:
        pass  # the caller died meanwhile
    return created + 1 if allowed else created


def _reset_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM, signal.SIGXCPU):
        signal.signal(sig, signal.SIG_DFL)
    for sig in (signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_DFL)


def show_source(source: str) -> None:
    """Let tracebacks quote the lines of `source` (compiled as "solution.py", no file)."""
    linecache.cache["solution.py"] = (len(source), None, source.splitlines(True), "solution.py")


def _user_traceback(exc: BaseException) -> str:
    # Drop the harness's own frames so the program sees a traceback of its code only.
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != "solution.py":
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


def _prelude_for_calls() -> dict[str, Any]:
    # LeetCode-style solutions use typing names (List, Optional, ...) without importing them.
    names = {name: getattr(typing, name) for name in typing.__all__}
    names.update({"__name__": "solution", "__builtins__": builtins})
    return names


def _run_preset_harness(command: dict[str, Any], namespace: dict[str, Any]) -> None:
    """Under the `lcb` and `humaneval` presets: define the preset harness's names in the
    program's namespace (compiled by the server when its Python is ours; compiling it here
    would cost more than a trivial test); the program (`code`) is then its trailer."""
    if "harness_code" in command:
        exec(marshal.loads(bytes.fromhex(command["harness_code"])), namespace)
    elif "harness_source" in command:
        exec(compile(command["harness_source"], "solution.py", "exec"), namespace)
    if "prior" in command:
        namespace["_PRIOR"] = command["prior"]  # an lcb test's earlier calls (JSON)


def _find_callable(namespace: dict[str, Any], fn_name: str) -> Any:
    target = namespace.get(fn_name)
    if callable(target) and not isinstance(target, type):
        return target
    solution = namespace.get("Solution")
    if isinstance(solution, type):
        return getattr(solution(), fn_name, None)
    return None


def _finish_threads() -> None:
    # A script's non-daemon threads finish before the interpreter exits; keep that.
    if threading.active_count() > 1:
        shutdown = getattr(threading, "_shutdown", None)
        if shutdown is not None:
            shutdown()


def _stdio(fd: int, mode: str) -> io.TextIOWrapper:
    raw = io.FileIO(fd, mode, closefd=False)
    if mode == "r":
        return io.TextIOWrapper(io.BufferedReader(raw))
    if fd == 1:
        return io.TextIOWrapper(io.BufferedWriter(raw, 1 << 16))
    return io.TextIOWrapper(io.BufferedWriter(raw), line_buffering=True)


WARM_UP_PROGRAM = "values = [int(x) + 1 for x in '1 2 3'.split()]\nprint(*values)\n"


def _warm_up(channel: socket.socket, read_end: int, write_end: int) -> None:
    """Walk the per-test code path once on dummy data before the real test arrives.

    A forked child pays a copy-on-write fault for every page it first writes to, and in
    Python merely calling a function writes (reference counts). Doing the work once while
    idle moves most of those faults off the test's critical path. When tests come back to
    back (a busy executor), warming up would only delay the next one: wait a moment for
    a test first, and warm up only if none came.
    """
    if _test_waiting(channel, WARM_UP_AFTER_IDLE_S):
        return  # the pipe is closed with every other stray fd as the test starts
    sample = {"nonce": "0" * 32, "mode": "stdin", "code": WARM_UP_PROGRAM, "args": [1, "a"]}
    command = json.loads(json.dumps(sample))
    if _test_waiting(channel):
        return
    try:
        saved, sys.stdout = sys.stdout, _stdio(write_end, "w")
        try:
            exec(compile(command["code"], "solution.py", "exec"), {"__name__": "__main__"})
            sys.stdout.flush()
        finally:
            sys.stdout = saved
        _stdio(read_end, "r")
        json.dumps({"status": "done"})
        _prelude_for_calls()
    finally:
        os.close(read_end)
        os.close(write_end)


def _test_waiting(channel: socket.socket, wait_s: float = 0.0) -> bool:
    return bool(select.select([channel], [], [], wait_s)[0])


def _write_files(files: list[list[Any]]) -> None:
    """Write [relative path, base64 contents, mode] entries into the working directory.

    The server refused absolute paths and `..`; O_NOFOLLOW and O_EXCL keep even a name
    it let through from writing anywhere but a new file under the working directory.
    """
    for name, contents, mode in files:
        path = os.path.join(WORKDIR, name)
        if os.path.isabs(name) or ".." in name.split("/"):
            raise ValueError(f"refused file name {name!r}")
        parent = os.path.dirname(path)
        if parent != WORKDIR:
            os.makedirs(parent, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(path, flags, int(mode))
        try:
            _write_all(fd, binascii.a2b_base64(contents))
        finally:
            os.close(fd)


def _exec_env(command: dict[str, Any]) -> dict[str, str]:
    env = dict(os.environ)
    env.update(command.get("env") or {})
    return env


def _exec_program(command: dict[str, Any]) -> NoReturn:
    """Become the program (a compiled binary or another language's runtime): the
    harness's fds are gone first, so the program holds its stdio and nothing else."""
    os.close(RECORD_FD)
    argv = [str(arg) for arg in command["argv"]]
    try:
        os.execve(argv[0], argv, _exec_env(command))
    except OSError as exc:
        os.write(2, f"cannot run {argv[0]}: {exc}\n".encode())
    os._exit(126)


def _compile_program(command: dict[str, Any]) -> NoReturn:
    """Run the compiler on the source (written by `_write_files`) and report what it
    left: "<nonce> {status, files}" on the record pipe, the compiler's own messages on
    stdout and stderr. The compiler never holds the record pipe."""
    nonce = command["nonce"]
    os.set_inheritable(RECORD_FD, False)
    argv = [str(arg) for arg in command["argv"]]
    try:
        pid = os.posix_spawn(argv[0], argv, _exec_env(command))
        _, status = os.waitpid(pid, 0)
    except OSError as exc:
        os.write(2, f"cannot run {argv[0]}: {exc}\n".encode())
        os._exit(126)
    record: dict[str, Any] = {"status": "compile_failed", "wait_status": status}
    if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        made: dict[str, str] = {}
        for name in sorted(os.listdir(WORKDIR)):
            if _is_artifact(name, command.get("artifacts", [])):
                with open(os.path.join(WORKDIR, name), "rb") as fh:
                    made[name] = binascii.b2a_base64(fh.read(), newline=False).decode()
        record = {"status": "compiled", "files": made}
    _write_all(RECORD_FD, (nonce + " " + json.dumps(record) + "\n").encode())
    os._exit(0)


def _is_artifact(name: str, patterns: list[str]) -> bool:
    """Whether a file the compiler left matches a pattern: a name, or `*.ext` (no glob
    import: every module the zygote imports is paid by every test's fork)."""
    for pattern in patterns:
        if pattern.startswith("*") and name.endswith(pattern[1:]) and name != pattern[1:]:
            return True
        if name == pattern:
            return True
    return False


def _mapped_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _spare_main(channel: socket.socket) -> NoReturn:
    """Never returns: a pre-forked child that waits for its test, then runs it."""
    try:
        # No capability ever reaches untrusted code (the zygote keeps one: the pid counter).
        _keep_capabilities()
        os.setsid()
        # While waiting, off the test's critical path: the spare becomes the test.
        _prefer_for_oom_kill()
        # Made before the filter: a pipe made after it waits for the zygote's answer,
        # and the zygote answers only while a test runs.
        warm_up_pipe = os.pipe()
        listener = _install_test_filter(TEST_FILTER)
        socket.send_fds(channel, [b"listener"], [listener] if listener >= 0 else [])
        if listener >= 0:
            os.close(listener)
        _install_test_filter(HANDOVER_FILTER, listen=False)
        _reset_signals()
        if hasattr(sys, "set_int_max_str_digits"):
            sys.set_int_max_str_digits(0)
        os.chdir(WORKDIR)
        _warm_up(channel, *warm_up_pipe)
        message, fds, _, _ = socket.recv_fds(channel, 64, 8)
        if not message or len(fds) != 5:
            os._exit(0)
    except BaseException:
        os._exit(125)
    _run_child(fds, channel)


def _run_child(fds: list[int], channel: socket.socket) -> NoReturn:
    """Never returns: becomes the test process and exits with its status."""
    try:
        fds = [*fds, channel.detach()]
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, HIGH_FD + i) for i, fd in enumerate(fds)]
        cmd_r, stdin_r, stdout_w, stderr_w, result_w, started_w = high
        os.dup2(stdin_r, 0)
        os.dup2(stdout_w, 1)
        os.dup2(stderr_w, 2)
        os.dup2(result_w, RECORD_FD)
        os.dup2(cmd_r, COMMAND_FD)
        os.dup2(started_w, STARTED_FD)
        os.closerange(STARTED_FD + 1, 65536)
        channel = socket.socket(fileno=STARTED_FD)
        command = json.loads(_read_all(COMMAND_FD))
        os.close(COMMAND_FD)
        nonce = command["nonce"]
        # The request's files and a compiled program's artifacts (sizes and names checked
        # by the server); written before the limits, as the harness's own work.
        _write_files(command.get("files") or [])
        if command.get("files"):
            # `python solution.py` puts the script's directory first on sys.path, so a
            # program imports the modules sent beside it (tinker-cookbook's harness does).
            sys.path.insert(0, WORKDIR)
        # Measured after the command is in memory: the program's limit is for its own
        # data, on top of what its source already takes here. A program that execs
        # starts from nothing mapped: it gets its language's allowance instead.
        native = command["mode"] in ("exec", "compile")
        _apply_limits(
            command["limits"],
            int(command["limits"].get("address_space_bytes", 0)) if native else _mapped_bytes(),
        )
        sys.stdin = _stdio(0, "r")
        sys.stdout = _stdio(1, "w")
        sys.stderr = _stdio(2, "w")
        sys.argv = ["solution.py"]
        memory_record = (nonce + ' {"status": "memory_error"}\n').encode()
        # "Untrusted code runs from here" goes to the zygote on a socket the program never
        # holds: a record pipe can be reopened (and drained) through /proc/self/fd.
        channel.send(b"started")
        channel.close()
    except BaseException:
        # The harness itself failed before any untrusted code ran: no "started" message, so
        # the server reports a sandbox error instead of blaming the program.
        try:
            traceback.print_exc()
        finally:
            os._exit(125)
    # From here on the program's own input (its source included) is in play: whatever
    # fails is the program's failure, never a sandbox error.
    if command["mode"] == "exec":
        _exec_program(command)
    if command["mode"] == "compile":
        _compile_program(command)
    try:
        code = compile(command["code"], "solution.py", "exec")
    except MemoryError:
        os.write(RECORD_FD, memory_record)
        os.write(2, b"MemoryError: the program is too large to compile\n")
        os._exit(1)
    except BaseException as exc:  # SyntaxError, ValueError (NUL bytes), RecursionError
        try:
            sys.stderr.write("".join(traceback.format_exception_only(type(exc), exc)))
            sys.stderr.flush()
        finally:
            os.write(RECORD_FD, (nonce + ' {"status": "syntax_error"}\n').encode())
            os._exit(1)
    status = 0
    record: dict[str, Any] = {}
    serialized = ""
    try:
        if command["mode"] == "call":
            namespace = _prelude_for_calls()
            _run_preset_harness(command, namespace)
            exec(code, namespace)
            target = _find_callable(namespace, command["fn_name"])
            if target is None:
                record = {"status": "missing"}
            else:
                value = target(*command["args"], **command["kwargs"])
                try:
                    serialized = json.dumps(value)
                except (TypeError, ValueError, RecursionError) as exc:
                    record = {"status": "unserializable", "type": type(value).__name__}
                    record["error"] = str(exc)[:200]
                else:
                    record = {"status": "returned"}
        elif command["mode"] == "check":
            # A check test: the check runs in this process and the program in a child that
            # cannot reach it (_check_harness.py, compiled by the server when its Python is
            # ours: compiling it here would cost more than the test); the record is the check's.
            checker: dict[str, Any] = {"__name__": "cobalt_checker", "__builtins__": builtins}
            if "checker_code" in command:
                program = marshal.loads(bytes.fromhex(command["checker_code"]))
            else:
                program = compile(command["checker_source"], "<checker>", "exec")
            exec(program, checker)
            record = checker["run_check"](code, command)
        else:
            namespace = {"__name__": "__main__", "__file__": "solution.py"}
            namespace["__builtins__"] = builtins
            _run_preset_harness(command, namespace)
            exec(code, namespace)
            _finish_threads()
            record = {"status": "done"}
    except MemoryError as exc:
        os.write(RECORD_FD, memory_record)
        try:
            show_source(command["code"])
            sys.stderr.write(_user_traceback(exc))
            sys.stderr.flush()
        except BaseException:
            os.write(2, b"MemoryError\n")
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        os._exit(1)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            status = exc.code or 0
        else:
            sys.stderr.write(str(exc.code) + "\n")
            status = 1
        record = {"status": "exit", "code": status}
    except BaseException as exc:
        try:
            show_source(command["code"])
            sys.stderr.write(_user_traceback(exc))
        except BaseException:
            pass
        record = {"status": "raised", "error": type(exc).__name__}
        status = 1
    try:
        sys.stdout.flush()
    except BaseException:
        pass
    try:
        sys.stderr.flush()
    except BaseException:
        pass
    data = (nonce + " " + json.dumps(record) + "\n").encode()
    if record.get("status") == "returned":
        data += serialized.encode()
    try:
        _write_all(RECORD_FD, data)
    except OSError:
        pass
    os._exit(status & 0xFF)


# --- the zygote loop ------------------------------------------------------------------


def _kill_all() -> None:
    """SIGKILL every process in the jail but us (kill(-1) never reaches the caller)."""
    if not KILL_ALL:
        return
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass  # nothing else was running


def _kill_everything_else() -> None:
    """Kill every other process in the jail and reap them (we are its init, pid 1)."""
    _kill_all()
    if not _in_own_pid_namespace():
        return
    _reap_orphans(block_s=2.0)


def _reap_orphans(block_s: float = 0.0) -> None:
    # Orphans of a test (daemons) are re-parented to us as the namespace's init.
    deadline = time.monotonic() + block_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.0005)


def _wipe(root: str) -> bool:
    """Remove everything below `root`, whatever the program left there.

    Works through directory file descriptors, one level at a time, so neither a deep
    tree (paths longer than PATH_MAX, more levels than the stack) nor odd permissions
    stop it. Returns False if something could not be removed in time.
    """
    directory = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    deadline = time.monotonic() + 5.0
    fd = os.open(root, directory)
    depth = 0
    try:
        while time.monotonic() < deadline:
            child = -1
            with os.scandir(fd) as entries:
                for entry in entries:
                    if not entry.is_dir(follow_symlinks=False):
                        try:
                            os.unlink(entry.name, dir_fd=fd)
                        except OSError:
                            pass
                        continue
                    try:
                        os.rmdir(entry.name, dir_fd=fd)
                        continue
                    except OSError:
                        pass
                    try:
                        os.chmod(entry.name, 0o700, dir_fd=fd, follow_symlinks=False)
                    except (OSError, NotImplementedError):
                        try:
                            os.chmod(entry.name, 0o700, dir_fd=fd)
                        except OSError:
                            pass
                    try:
                        child = os.open(entry.name, directory, dir_fd=fd)
                    except OSError:
                        continue
                    break
            if child >= 0:
                os.close(fd)
                fd, depth = child, depth + 1
                continue
            if depth == 0:
                return not os.listdir(fd)
            parent = os.open("..", directory, dir_fd=fd)
            os.close(fd)
            fd, depth = parent, depth - 1
        return False
    finally:
        os.close(fd)


WRITABLE_MODES: dict[str, int] = {}
"""The permission bits of each writable dir as the jail started (a test may chmod them)."""
TMPFS_BYTES: dict[str, int] = {}
"""The size of each writable tmpfs as bubblewrap made it."""


def _wipe_writable_dirs() -> bool:
    """Unsafe mode: empty the slot's private directory (no mount to replace)."""
    try:
        for path in WRITABLE_DIRS:
            os.chmod(path, WRITABLE_MODES.get(path, 0o755))
        clean = all([_wipe(path) for path in WRITABLE_DIRS])
        os.makedirs(WORKDIR, exist_ok=True)
    except OSError:
        return False  # the jail is retired and replaced
    return clean


def _fresh_tmpfs(path: str) -> None:
    """Put a new, empty tmpfs on `path` in place of the one there (jail mode only).

    Whatever a test changed on the old one (default ACLs, xattrs, times, owner, mode, the
    inode numbers it handed out) goes with it; the kernel frees its files as it unmounts.
    """
    if _LIBC.umount2(path.encode(), MNT_DETACH) != 0:
        raise OSError(ctypes.get_errno(), f"umount {path} failed")
    options = f"size={TMPFS_BYTES[path]},mode={WRITABLE_MODES[path]:o}".encode()
    if _LIBC.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        raise OSError(ctypes.get_errno(), f"mount tmpfs on {path} failed")


def _reset_writable_dirs() -> bool:
    """Return the writable dirs to their state at jail start; False: retire the jail."""
    if not _in_own_pid_namespace():
        return _wipe_writable_dirs()
    try:
        for path in WRITABLE_DIRS:
            _fresh_tmpfs(path)
        os.makedirs(WORKDIR)
    except OSError:
        return False
    return True


TEST_CGROUP_FD = -1
"""Writing a pid here moves that process into the slot's test cgroup (-1: none; see
cgroups.py): at the limit, the kernel then kills among the test's processes, never us."""


def _enter_test_cgroup(pid: int) -> None:
    if TEST_CGROUP_FD >= 0:
        try:
            os.write(TEST_CGROUP_FD, str(pid).encode())
        except OSError:
            pass  # it stays in the slot's cgroup, as without a test cgroup


class _Spare:
    """A pre-forked child waiting for its test on a private socket."""

    def __init__(self, ctl: socket.socket) -> None:
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        _reset_pid_counter()
        pid = os.fork()
        if pid == 0:
            ctl.close()
            parent_end.close()
            _spare_main(child_end)
        child_end.close()
        # Long before it has a test (off the test's critical path, while the server reads
        # the last result): nothing a test runs ever sits in our cgroup.
        _enter_test_cgroup(pid)
        self.pid = pid
        self.channel = parent_end
        self.pidfd = os.pidfd_open(pid)
        self.baseline_kb = _own_anon_kb()

    def take_listener(self) -> int:
        """The spare's seccomp notification fd (-1: none, or the spare died first)."""
        try:
            message, fds, _, _ = socket.recv_fds(self.channel, 64, 1)
        except OSError:
            return -1
        if message != b"listener" or not fds:
            for fd in fds:
                os.close(fd)
            return -1
        return fds[0]

    def close(self) -> None:
        self.channel.close()
        os.close(self.pidfd)


def _harness_started(channel: socket.socket) -> bool:
    """Whether the test's harness said it is about to run untrusted code (non-blocking)."""
    try:
        return channel.recv(16, socket.MSG_DONTWAIT) == b"started"
    except OSError:
        return False


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _cpu_ns(pid: int) -> int:
    """CPU time a process has used so far, in ns (0 where schedstat is unavailable)."""
    try:
        with open(f"/proc/{pid}/schedstat") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _anon_kb(pid: str) -> int:
    anon = 0
    try:
        with open("/proc/" + pid + "/status") as fh:
            for line in fh:
                if line.startswith(("RssAnon:", "RssShmem:")):
                    anon += int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return anon


def _own_anon_kb() -> int:
    # From statm (resident minus file-backed and shared): the init's /proc/1/status is
    # masked from tests, and so from us (see ACTIVITY_FILES in jail_view.py).
    try:
        with open("/proc/self/statm") as fh:
            fields = fh.read().split()
        return (int(fields[1]) - int(fields[2])) * (os.sysconf("SC_PAGE_SIZE") // 1024)
    except (OSError, ValueError, IndexError):
        return 0


INODE_KB = 1
"""Kernel memory charged per file in the writable tmpfs dirs (inode + dentry, roughly)."""
CLOCK_TICK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def _tick_ns(fields: list[str]) -> int:
    # utime, stime, cutime, cstime: this process and its reaped children.
    return sum(int(value) for value in fields[11:15]) * CLOCK_TICK_NS


def _jail_usage(baseline_kb: int) -> tuple[int, int]:
    """Memory (KiB) and CPU (ns) the test's processes hold and used together.

    RLIMIT_AS and RLIMIT_CPU bound each process, but a test may fork, catch SIGXCPU or
    fill the tmpfs: this sums the anonymous and shared-memory pages of every process in
    the jail (minus the interpreter pages each forked process starts with), the files and
    inodes in the writable tmpfs dirs (memory too), and every process's CPU time with its
    reaped children's. A kernel cgroup does this where the host offers one.
    """
    memory_kb = 0
    cpu_ns = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or entry == "1":
            continue
        memory_kb += max(0, _anon_kb(entry) - baseline_kb)
        try:
            with open("/proc/" + entry + "/stat") as fh:
                cpu_ns += _tick_ns(fh.read().rsplit(")", 1)[1].split())
        except (OSError, ValueError, IndexError):
            pass
    for path in WRITABLE_DIRS:
        try:
            usage = os.statvfs(path)
        except OSError:
            continue
        memory_kb += (usage.f_blocks - usage.f_bfree) * usage.f_frsize // 1024
        memory_kb += (usage.f_files - usage.f_ffree) * INODE_KB
    return memory_kb, cpu_ns


def _reaped_cpu_ns() -> int:
    """CPU time of the processes we (the jail's init) reaped: orphans of tests."""
    times = os.times()
    return int((times.children_user + times.children_system) * 1e9)


def _run_one(
    ctl: socket.socket, spare: _Spare, test_id: int, fds: list[int], limits: dict[str, int]
) -> bool:
    """Hand the test to the spare child, wait for it, clean up. False means shut down."""
    # The spare already used some CPU (fork, warm-up); the test is charged from here on.
    cpu_before_ns = _cpu_ns(spare.pid)
    reaped_before_ns = _reaped_cpu_ns()
    memory_kb = int(limits.get("memory_kb", 0))
    cpu_limit_ns = int(limits.get("cpu_ms", 0)) * 1_000_000
    started_ns = time.monotonic_ns()
    try:
        socket.send_fds(spare.channel, [b"run"], fds)
    except OSError:
        # The spare died while idle (it should not): replace it and try once more.
        _kill_group(spare.pid)
        os.waitpid(spare.pid, 0)
        spare.close()
        spare = _Spare(ctl)
        socket.send_fds(spare.channel, [b"run"], fds)
    _send(ctl, {"event": "running", "id": test_id})
    for fd in fds:
        os.close(fd)
    listener = spare.take_listener()
    pipe_budget = int(limits.get("pipes", 0))
    pipes_created = 0
    pid = spare.pid
    poller = select.poll()
    poller.register(ctl.fileno(), select.POLLIN)
    poller.register(spare.pidfd, select.POLLIN)
    if listener >= 0:
        poller.register(listener, select.POLLIN)
    killed = False
    memory_exceeded = False
    cpu_exceeded = False
    polled_cpu_ns = 0
    shutdown = False
    next_poll_ns = time.monotonic_ns() + MEMORY_POLL_MS * 1_000_000
    while True:
        wait_ms = max(0, (next_poll_ns - time.monotonic_ns()) // 1_000_000)
        events = dict(poller.poll(wait_ms))
        if spare.pidfd in events:
            break
        if listener in events:
            if events[listener] & select.POLLIN:
                pipes_created = _answer_pipe_request(listener, pipe_budget, pipes_created)
            else:
                poller.unregister(listener)  # no process of the test is left to ask
        if time.monotonic_ns() >= next_poll_ns:
            next_poll_ns = time.monotonic_ns() + MEMORY_POLL_MS * 1_000_000
            # Still running after a while: check what the whole jail uses. CPU is judged
            # on time used, so a test that catches SIGXCPU or forks is still stopped.
            used_kb, used_ns = _jail_usage(spare.baseline_kb)
            used_ns += _reaped_cpu_ns() - reaped_before_ns - cpu_before_ns
            polled_cpu_ns = max(polled_cpu_ns, used_ns)
            over_memory = memory_kb and used_kb > memory_kb
            over_cpu = cpu_limit_ns and used_ns > cpu_limit_ns
            if (over_memory or over_cpu) and not killed:
                memory_exceeded, cpu_exceeded = bool(over_memory), bool(over_cpu)
                killed = True
                _kill_group(pid)
                _kill_all()
        if ctl.fileno() in events:
            message, _, _, _ = ctl.recvmsg(MAX_MESSAGE)
            op = json.loads(message).get("op") if message else "exit"
            if op in ("kill", "exit"):
                killed = True
                shutdown = op == "exit"
                _kill_group(pid)
                _kill_all()
                if not message:
                    poller.unregister(ctl.fileno())
    _, status, usage = os.wait4(pid, 0)
    wall_ns = time.monotonic_ns() - started_ns
    # The child's "started" message waits in the socket: the program never held it.
    started = _harness_started(spare.channel)
    spare.close()
    if listener >= 0:
        os.close(listener)
    _kill_everything_else()
    if shutdown:
        return False
    _send(
        ctl,
        {
            "event": "exited",
            "id": test_id,
            "status": status,
            "cpu_ns": max(
                0, int((usage.ru_utime + usage.ru_stime) * 1e9) - cpu_before_ns, polled_cpu_ns
            ),
            "maxrss_kb": usage.ru_maxrss,
            "wall_ns": wall_ns,
            "killed": killed,
            "memory_exceeded": memory_exceeded,
            "cpu_exceeded": cpu_exceeded,
            "started": started,
        },
    )
    # Reset after answering, off the test's critical path: the server judges meanwhile, and
    # starts the next test's clock only at our "running". A jail we could not reset is
    # retired; the server starts a fresh one.
    return _reset_writable_dirs()


def _preload(names: str) -> list[str]:
    """Import each module named (comma-separated); returns those that imported."""
    done = []
    for name in filter(None, names.split(",")):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a missing optional package is not fatal
            continue
        done.append(name)
    return done


def main() -> None:
    global WRITABLE_DIRS, WORKDIR, KILL_ALL, TEST_FILTER, HANDOVER_FILTER, TEST_CGROUP_FD
    if not _in_own_pid_namespace():
        # Unsafe mode: our own directory, and kill(-1) only if our uid is the slot's alone
        # (otherwise it would reach the server and everything else running as its user).
        WRITABLE_DIRS = (sys.argv[4],)
        WORKDIR = os.path.join(sys.argv[4], "run")
        KILL_ALL = sys.argv[5] == "dedicated-uid"
    TEST_FILTER, HANDOVER_FILTER = _split_filters(bytes.fromhex(sys.argv[2]))
    if int(sys.argv[3]) >= 0:
        # Out of the way of the test process's own numbers, and never inherited by it.
        TEST_CGROUP_FD = fcntl.fcntl(int(sys.argv[3]), fcntl.F_DUPFD_CLOEXEC, 51)
        os.close(int(sys.argv[3]))
    ctl = socket.socket(fileno=int(sys.argv[1]))
    ctl_fd = fcntl.fcntl(ctl.fileno(), fcntl.F_DUPFD_CLOEXEC, 50)
    ctl.close()
    ctl = socket.socket(fileno=ctl_fd)
    _make_non_dumpable()
    if _in_own_pid_namespace():
        _lock_jail_namespaces()
    # The kernel drops signals sent to a namespace's init from inside it unless init has
    # a handler: Python installs one for SIGINT, so kill(1, SIGINT) would stop us.
    for sig in (
        signal.SIGPIPE,
        signal.SIGINT,
        signal.SIGTERM,
        signal.SIGHUP,
        signal.SIGUSR1,
        signal.SIGUSR2,
    ):
        signal.signal(sig, signal.SIG_IGN)
    # The deployment's optional packages (numpy, pandas, ...), imported once here so that
    # each forked test shares them instead of paying their import (hundreds of ms).
    preloaded = _preload(os.environ.get("COBALT_PRELOAD", ""))
    # Move every object made so far out of the collector's reach: a collection in a
    # forked child would otherwise touch (and copy) every page of the zygote's heap.
    gc.collect()
    gc.freeze()
    # bwrap started us in /tmp: a cwd there would keep each replaced tmpfs alive.
    os.chdir("/")
    for path in WRITABLE_DIRS:
        WRITABLE_MODES[path] = os.stat(path).st_mode & 0o7777
        usage = os.statvfs(path)
        TMPFS_BYTES[path] = usage.f_blocks * usage.f_frsize
    # The first test gets a tmpfs made exactly as every later one is.
    if not _reset_writable_dirs():
        raise SystemExit("cannot prepare the writable directories")
    spare = _Spare(ctl)
    _send(
        ctl,
        {
            "event": "ready",
            "pid": os.getpid(),
            "uid": os.getuid(),
            "python": sys.version.split()[0],
            "isolated_pids": _in_own_pid_namespace(),
            "steady_pids": PID_COUNTER_FD >= 0,
            "preloaded": preloaded,
        },
    )
    while True:
        message, fds, _, _ = socket.recv_fds(ctl, MAX_MESSAGE, 8)
        if not message:
            break
        op = json.loads(message)
        if op.get("op") == "run" and len(fds) == 5:
            if not _run_one(ctl, spare, op["id"], fds, op):
                return
            # Fork the next test's process now, while the server reads this result.
            spare = _Spare(ctl)
        else:
            for fd in fds:
                os.close(fd)
            if op.get("op") == "exit":
                break
    _kill_group(spare.pid)


if __name__ == "__main__":
    main()
