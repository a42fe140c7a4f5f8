"""The executor's attack catalogue: hostile programs and what must (not) come of them.

One `Case` per attack from the threat list (/work/shared/reference/anchors-executor.md,
section 2), plus the programs that probe whether anything persists between requests.
tests/executor/test_attacks.py runs them against the in-process sandbox and
tests/containers against the executor image; both judge a jail by `JAIL_PROBE`'s output.
"""

from __future__ import annotations

import secrets
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PWNED = "PWNED"
TOKEN = secrets.token_hex(6)
"""Unique per run: names of marker files, IPC keys and the like."""
ATTACKS = Path(__file__).parents[1] / "executor" / "attacks"
JAIL_PROBE = (ATTACKS / "jail_probe.py").read_text()
PID1_TAKEOVER = (ATTACKS / "pid1_takeover.py").read_text()

QUICK = {"wall_s": 1.0, "memory_mb": 128, "output_kb": 64}
PROBE_LIMITS = {"wall_s": 5.0, "memory_mb": 256}
SETTLE_S = 3.0
KILL_GRACE_S = 1.0
"""SandboxConfig.kill_grace_s: how long the server waits for the zygote after a kill."""


def probe_failure(baseline: str, result: dict[str, Any]) -> str:
    got = result["stdout"].splitlines()
    want = baseline.splitlines()
    changed = [
        f"  fresh jail: {w!r}\n  now:        {g!r}"
        for w, g in zip(want, got, strict=False)
        if w != g
    ]
    extra = got[len(want) :] or want[len(got) :]
    return (
        f"the jail differs from a fresh one after the attack (verdict {result['verdict']}):\n"
        + "\n".join(changed + [f"  extra: {line!r}" for line in extra])
        + f"\nfeedback: {result['feedback'][:600]}"
    )


# --- resource hogs and side channels between slots (issue 18, classes 3 and 6) ---------

PROCESS_HOG = """
import os, time
end = time.time() + 5
while time.time() < end:
    try:
        if os.fork() == 0:
            time.sleep(10)
            os._exit(0)
    except OSError:
        time.sleep(0.005)
print("PWNED")
"""
"""Takes every process it can and holds them: a neighbour in another slot must still fork."""

KERNEL_MEMORY_HOG = """
import os, socket, time

def fill():
    held = []
    try:
        while True:
            a, b = socket.socketpair()
            a.setblocking(False)
            try:
                while True:
                    a.send(b"x" * 65536)
            except BlockingIOError:
                pass
            held.append((a, b))
    except OSError:
        pass
    return held

for _ in range(15):
    if os.fork() == 0:
        held = fill()
        time.sleep(10)
        os._exit(0)
held = fill()
time.sleep(5)
print("PWNED")
"""
"""Queues about 500 MiB in socket buffers across 16 processes: kernel memory, invisible to
RLIMIT_AS and to the zygote's polls; only a memory cgroup charges it."""

ACTIVITY_SOURCES = (
    *(f"/proc/1/{name}" for name in ("stat", "status", "sched", "schedstat", "io")),
    *(f"/proc/1/task/1/{name}" for name in ("stat", "status", "sched", "schedstat")),
    *(f"/proc/pressure/{name}" for name in ("cpu", "memory", "io")),
    *(f"/proc/sys/fs/{name}" for name in ("file-nr", "inode-nr", "dentry-state")),
    *(
        f"/proc/{name}"
        for name in (
            "loadavg stat schedstat meminfo vmstat zoneinfo buddyinfo interrupts softirqs "
            "diskstats locks"
        ).split()
    ),
)
"""Files that change with what other processes do: the zygote's reaped CPU time and
context switches, the host's load, counters and free memory. (The PID namespace's last
pid is reset before each test, so it shows what a fresh jail's would: see
tests/executor/test_isolation.py.)"""

ACTIVITY_PROBE = (
    "import json\n"
    f"SOURCES = {ACTIVITY_SOURCES!r}\n"
    """
visible = {}
for path in SOURCES:
    try:
        with open(path) as fh:
            text = fh.read()
    except OSError:
        continue
    if text.strip():
        visible[path] = text[:80]
print(json.dumps(visible, sort_keys=True))
"""
)
"""Prints, as JSON, every activity source a test can read (`{}` when all are hidden)."""


# --- the generic cases ----------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One attack program and what must (not) come of it."""

    id: str
    code: str
    limits: dict[str, Any] = field(default_factory=lambda: dict(QUICK))
    stdin: str = ""
    call: bool = False
    """Call-based test: solve(2, 3) must return 5."""
    verdicts: tuple[str, ...] = ()
    """If set, the verdict must be one of these (always: never "accepted")."""
    host_paths: tuple[str, ...] = ()
    """Paths that must not exist on the host afterwards."""
    max_seconds: float | None = None
    """The request must be answered within this many seconds."""


ZYGOTE_STATE = """
import os, signal, sys, time


def report_zygote():
    # Its /proc/1/stat is masked (empty), so ask the kernel whether it still exists.
    try:
        os.kill(1, 0)
        state = "alive"
    except ProcessLookupError:
        state = "gone"
    except PermissionError:
        state = "alive"
    print("zygote state", state, file=sys.stderr)
    if state != "alive":
        print("PWNED")
"""


def fill_program(source: str, **values: Any) -> str:
    """`source` with its @NAME@ placeholders (TOKEN and `values`) filled in."""
    code = textwrap.dedent(source).strip() + "\n"
    for key, value in {"TOKEN": TOKEN, **values}.items():
        code = code.replace(f"@{key}@", str(value))
    return code


SYSCALL_PRELUDE = """
import ctypes
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
results = []


def sc(name, *args):
    ret = libc.syscall(*args)
    results.append((name, ret, os.strerror(ctypes.get_errno()) if ret < 0 else "ok"))
    return ret
"""

SYSCALL_EPILOGUE = """
print(results, file=sys.stderr)
if any(ret >= 0 for _, ret, _ in results):
    print("PWNED")
"""


def _syscall_case(case_id: str, body: str) -> Case:
    code = SYSCALL_PRELUDE + textwrap.dedent(body) + SYSCALL_EPILOGUE
    return Case(case_id, code)


def _host_file_case(case_id: str, *paths: str) -> Case:
    code = f"""
    import os, sys
    for path in {list(paths)!r}:
        try:
            if os.path.isdir(path):
                print(path, os.listdir(path), file=sys.stderr)
            else:
                with open(path, "rb") as fh:
                    print(path, fh.read(200), file=sys.stderr)
        except OSError as exc:
            print(path, exc, file=sys.stderr)
        else:
            print("PWNED")
            break
    """
    return Case(case_id, code)


def _write_case(case_id: str, target: str, host_path: str | None = None) -> Case:
    # O_WRONLY without O_TRUNC and no write: if the sandbox were broken, nothing on the
    # host is damaged, and opening for writing is proof enough.
    code = f"""
    import os, sys
    try:
        fd = os.open({target!r}, os.O_WRONLY | os.O_CREAT, 0o644)
    except OSError as exc:
        print(exc, file=sys.stderr)
    else:
        print("PWNED")
    """
    host = (host_path,) if host_path else ()
    return Case(case_id, code, host_paths=host)


def _fill_case(case_id: str, directory: str) -> Case:
    code = f"""
    import os
    chunk = b"x" * (1 << 20)
    for n in range(5):
        with open(os.path.join({directory!r}, "cobalt-fill-%d" % n), "wb") as fh:
            for _ in range(60):
                fh.write(chunk)
    print("PWNED")
    """
    return Case(case_id, code, limits={"wall_s": 3.0, "memory_mb": 64, "output_kb": 64})


TLE = ("time_limit",)

CASES: list[Case] = [
    # A1-A3: process, thread and memory bombs.
    Case(
        "fork_bomb",
        """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """,
        # Stopped by whichever limit it meets first: the pids cap leaves it spinning until
        # its time runs out, or its copies' memory fill the test's own memory cgroup (the
        # per-test cgroup of issue 47; under load the second came first in the suite).
        verdicts=("time_limit", "memory_limit"),
    ),
    Case(
        "thread_bomb",
        """
        import threading, time
        threading.stack_size(64 * 1024)
        threads = []
        while True:
            thread = threading.Thread(target=time.sleep, args=(3600,), daemon=True)
            thread.start()
            threads.append(thread)
        """,
    ),
    Case(
        "memory_big_alloc",
        """
        block = bytearray(10 ** 11)
        print("PWNED")
        """,
        verdicts=("memory_limit",),
    ),
    Case(
        "memory_slow_growth",
        """
        import time
        hoard = []
        while True:
            chunk = bytearray(4 << 20)
            for i in range(0, len(chunk), 4096):
                chunk[i] = 1
            hoard.append(chunk)
            time.sleep(0.005)
        """,
        limits={"wall_s": 3.0, "memory_mb": 128, "output_kb": 64},
        verdicts=("memory_limit",),
    ),
    Case(
        # The memory limit is per test; six processes of 100 MiB each are 600 MiB at once.
        "memory_split_over_processes",
        """
        import os
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        children = []
        for _ in range(6):
            pid = os.fork()
            if pid == 0:
                os.close(go_w)
                block = bytearray(100 << 20)
                for i in range(0, len(block), 4096):
                    block[i] = 1
                os.write(ready_w, b"+")
                os.read(go_r, 1)
                os._exit(0)
            children.append(pid)
        os.close(ready_w)
        got = b""
        while len(got) < 6:
            part = os.read(ready_r, 6)
            if not part:
                break
            got += part
        os.close(go_w)
        for pid in children:
            os.waitpid(pid, 0)
        if len(got) == 6:
            print("PWNED")
        """,
        limits={"wall_s": 3.0, "memory_mb": 128, "output_kb": 64},
    ),
    Case(
        # memfd pages are not address space: RLIMIT_AS does not see them.
        "memory_in_memfd",
        """
        import os
        chunk = b"x" * (1 << 20)
        hoard = []
        for _ in range(6):
            fd = os.memfd_create("hoard")
            for _ in range(60):
                os.write(fd, chunk)
            hoard.append(fd)
        print("PWNED")
        """,
        limits={"wall_s": 3.0, "memory_mb": 64, "output_kb": 64},
    ),
    Case(
        # SysV shared memory outlives its creator (and the test) until someone removes it.
        "memory_in_sysv_shm",
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        made = 0
        for n in range(4):
            shmid = libc.shmget(0x7000 + n, 60 << 20, 0o1600)
            if shmid < 0:
                break
            address = libc.shmat(shmid, None, 0)
            if address in (None, ctypes.c_void_p(-1).value):
                break
            ctypes.memset(address, 1, 60 << 20)
            libc.shmdt(ctypes.c_void_p(address))
            made += 1
        if made == 4:
            print("PWNED")
        """,
        limits={"wall_s": 3.0, "memory_mb": 64, "output_kb": 64},
    ),
    # A4-A5: CPU, sleeping, stdin.
    Case("cpu_spin", "while True:\n    pass", verdicts=TLE, max_seconds=4.0),
    Case(
        "cpu_spin_in_children",
        """
        import os
        for _ in range(3):
            if os.fork() == 0:
                break
        while True:
            pass
        """,
        verdicts=TLE,
    ),
    Case("sleep_forever", "import time\ntime.sleep(10 ** 6)", verdicts=TLE, max_seconds=4.0),
    Case(
        "block_on_stdin",
        """
        import os, sys
        sys.stdin.read()
        os.read(0, 1)
        input()
        print("PWNED")
        """,
        limits={"wall_s": 3.0, "memory_mb": 128, "output_kb": 64},
        verdicts=("runtime_error",),
        max_seconds=2.0,
    ),
    # A6: output floods.
    Case(
        "flood_stdout",
        "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)",
        verdicts=("output_limit",),
    ),
    Case(
        "flood_stderr",
        "import sys\nwhile True:\n    sys.stderr.write('x' * 65536)",
        verdicts=("output_limit",),
    ),
    # A7: disk and inodes.
    _fill_case("fill_tmp", "/tmp"),
    _fill_case("fill_dev_shm", "/dev/shm"),
    _fill_case("fill_dev", "/dev"),
    Case(
        "many_inodes",
        """
        import os
        os.chdir("/tmp")
        for i in range(10 ** 6):
            open("f%d" % i, "w").close()
        print("PWNED")
        """,
    ),
    Case(
        # Deeper than the zygote's recursive wipe can go with the default recursion limit.
        "deep_directory_tree",
        """
        import os
        os.chdir("/tmp/run")
        for _ in range(3000):
            os.mkdir("d")
            os.chdir("d")
        print("deep")
        """,
    ),
    # A11: network.
    Case(
        "net_tcp_local",
        """
        import socket, sys
        for host, port in [("127.0.0.1", @TCP_PORT@), ("127.0.0.1", 5432),
                           ("127.0.0.1", 6379), ("::1", @TCP_PORT@), ("localhost", 6379)]:
            try:
                socket.create_connection((host, port), timeout=0.3)
            except OSError as exc:
                print(host, port, exc, file=sys.stderr)
            else:
                print("PWNED")
                break
        """,
    ),
    Case(
        "net_udp_local",
        """
        import socket, sys
        sent = []
        for port in (@UDP_PORT@, 5432, 6379, 53):
            try:
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                sock.sendto(b"cobalt-attack", ("127.0.0.1", port))
                sent.append(port)
            except OSError as exc:
                print(port, exc, file=sys.stderr)
        if sent:
            print("PWNED")
        """,
    ),
    Case(
        # Only connect(): if the sandbox were open this would send a SYN, nothing more.
        "net_external",
        """
        import socket, sys
        reached = []
        for host, port, kind in [("10.0.0.1", 80, socket.SOCK_STREAM),
                                 ("1.1.1.1", 53, socket.SOCK_STREAM),
                                 ("169.254.169.254", 80, socket.SOCK_STREAM),
                                 ("1.1.1.1", 53, socket.SOCK_DGRAM)]:
            try:
                sock = socket.socket(socket.AF_INET, kind)
                sock.settimeout(0.3)
                sock.connect((host, port))
                reached.append((host, port))
            except OSError as exc:
                print(host, port, exc, file=sys.stderr)
        if reached:
            print("PWNED")
        """,
    ),
    Case(
        "net_dns",
        """
        import socket, sys
        for name in ("example.com", "metadata.google.internal", "pypi.org"):
            try:
                print(socket.getaddrinfo(name, 80), file=sys.stderr)
            except OSError as exc:
                print(name, exc, file=sys.stderr)
            else:
                print("PWNED")
                break
        """,
    ),
    Case(
        "net_raw_netlink_packet_sockets",
        """
        import ctypes, socket, sys
        made = []
        for family, kind, proto in [
            (socket.AF_PACKET, socket.SOCK_RAW, 0x0300),
            (socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
            (socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_ICMP),
            (socket.AF_NETLINK, socket.SOCK_RAW, 0),
            (socket.AF_NETLINK, socket.SOCK_DGRAM, 9),
            (socket.AF_INET6, socket.SOCK_STREAM, 0),
            (40, socket.SOCK_STREAM, 0),
            (38, socket.SOCK_SEQPACKET, 0),
        ]:
            try:
                socket.socket(family, kind, proto)
                made.append((family, kind))
            except OSError as exc:
                print(family, kind, exc, file=sys.stderr)
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.syscall(41, 2, 1, 0) >= 0:
            made.append("syscall(socket, AF_INET)")
        pair = (ctypes.c_int * 2)()
        if libc.syscall(53, 2, 2, 0, pair) >= 0:
            made.append("socketpair(AF_INET)")
        if made:
            print("PWNED")
        """,
    ),
    Case(
        "net_unix_sockets_of_host",
        """
        import socket, sys
        for address in ["\\0cobalt-attack-@TOKEN@", "@UNIX_PATH@",
                        "/run/dbus/system_bus_socket", "/var/run/docker.sock"]:
            try:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.settimeout(0.3)
                sock.connect(address)
            except OSError as exc:
                print(repr(address), exc, file=sys.stderr)
            else:
                print("PWNED")
                break
        """,
    ),
    # A9: host files.
    _host_file_case("read_etc_shadow", "/etc/shadow"),
    _host_file_case("read_etc_passwd", "/etc/passwd", "/etc/hostname", "/etc/hosts"),
    _host_file_case("read_root_home", "/root", "/root/.bash_history", "/home"),
    _host_file_case(
        "read_project_files", "/work/main/pyproject.toml", "/work/main", "/work/main/.venv"
    ),
    _host_file_case(
        "read_shared_dir", "/work/shared/reference/anchors-executor.md", "/work/shared", "/work"
    ),
    Case(
        "escape_via_proc_root_and_symlinks",
        """
        import os, sys
        found = []
        for path in ["/proc/self/root/etc/passwd", "/proc/1/root/etc/passwd",
                     "/proc/2/root/etc/passwd", "/proc/self/root/../../../etc/passwd",
                     "/proc/1/cwd/etc/passwd", "/proc/2/cwd/../etc/passwd",
                     "/proc/1/root/work/main/pyproject.toml"]:
            try:
                with open(path, "rb") as fh:
                    found.append((path, fh.read(40)))
            except OSError as exc:
                print(path, exc, file=sys.stderr)
        os.symlink("/proc/1/root", "/tmp/run/r1")
        os.symlink("../../../../../../etc/passwd", "/tmp/run/up")
        for root in ["/proc/self/root/..", "/proc/1/root/..", "/proc/2/root/..",
                     "/tmp/run/r1/..", "/proc/self/cwd/../../.."]:
            try:
                names = set(os.listdir(root))
            except OSError as exc:
                print(root, exc, file=sys.stderr)
                continue
            # The jail has an /etc of its own (the JDK's configuration, languages.py):
            # the host's root is the one with /etc/passwd.
            host = names & {"home", "work", "root", "var", "boot"}
            if host or os.path.exists(os.path.join(root, "etc", "passwd")):
                found.append((root, sorted(names)))
        try:
            with open("/tmp/run/up", "rb") as fh:
                found.append(("up", fh.read(40)))
        except OSError as exc:
            print("up", exc, file=sys.stderr)
        try:
            os.link("/usr/bin/python3.11", "/tmp/run/python-link")
            found.append("hard link to the interpreter")
        except OSError as exc:
            print("link", exc, file=sys.stderr)
        print(found, file=sys.stderr)
        if found:
            print("PWNED")
        """,
    ),
    # A15: writing outside the work directory.
    _write_case(
        "write_usr_lib_python",
        f"/usr/lib/python3.11/cobalt_attack_{TOKEN}.py",
        f"/usr/lib/python3.11/cobalt_attack_{TOKEN}.py",
    ),
    _write_case("write_interpreter", "/usr/bin/python3.11"),
    _write_case("write_usr", f"/usr/cobalt_attack_{TOKEN}", f"/usr/cobalt_attack_{TOKEN}"),
    _write_case("write_root_dir", f"/cobalt_attack_{TOKEN}", f"/cobalt_attack_{TOKEN}"),
    _write_case("write_dev", f"/dev/cobalt_attack_{TOKEN}", f"/dev/cobalt_attack_{TOKEN}"),
    _write_case("write_proc_sys", "/proc/sys/kernel/core_pattern"),
    _write_case("write_sysrq_trigger", "/proc/sysrq-trigger"),
    _write_case(
        "write_project_dir",
        f"/work/main/cobalt_attack_{TOKEN}",
        f"/work/main/cobalt_attack_{TOKEN}",
    ),
    Case(
        # Writing /tmp and /dev/shm inside the jail is allowed, but must not touch the host's.
        "write_host_tmp_marker",
        f"""
        for path in ("/tmp/cobalt_attack_{TOKEN}", "/dev/shm/cobalt_attack_{TOKEN}"):
            with open(path, "w") as fh:
                fh.write("marker")
        print("written")
        """,
        host_paths=(f"/tmp/cobalt_attack_{TOKEN}", f"/dev/shm/cobalt_attack_{TOKEN}"),
    ),
    # A12: killing the server, the jail, neighbours.
    Case(
        # The zygote is the jail's init, which the kernel shields from signals sent from
        # inside its namespace: it must still be alive (PWNED means it died or stopped).
        "kill_zygote",
        ZYGOTE_STATE
        + textwrap.dedent(
            """
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(0.3)
        report_zygote()
        """
        ),
    ),
    Case(
        "kill_everything",
        """
        import os, signal, time
        os.kill(-1, signal.SIGKILL)
        time.sleep(0.3)
        print("PWNED")
        """,
    ),
    Case(
        "kill_jail_init",
        """
        import os, signal, sys, time
        try:
            os.kill(1, signal.SIGKILL)
        except OSError as exc:
            print(exc, file=sys.stderr)
        time.sleep(0.3)
        print("init still alive", file=sys.stderr)
        """,
    ),
    Case(
        # Signal 0 only: probes whether host pids (server, jails) are visible at all.
        "kill_server_by_host_pid",
        """
        import os, sys
        visible = []
        for pid in @HOST_PIDS@:
            try:
                os.kill(pid, 0)
                visible.append(pid)
            except OSError as exc:
                print(pid, exc, file=sys.stderr)
        if visible:
            print("PWNED")
        """,
    ),
    # A14: signals.
    Case(
        "ignore_sigterm_sigxcpu",
        """
        import signal
        for sig in (signal.SIGTERM, signal.SIGXCPU, signal.SIGINT, signal.SIGHUP,
                    signal.SIGALRM, signal.SIGUSR1, signal.SIGVTALRM, signal.SIGPROF):
            signal.signal(sig, signal.SIG_IGN)
        while True:
            pass
        """,
        limits={"wall_s": 1.0, "cpu_s": 1.0, "memory_mb": 128, "output_kb": 64},
        verdicts=TLE,
        max_seconds=4.0,
    ),
    Case(
        "sigstop_own_process_group",
        """
        import os, signal
        os.killpg(0, signal.SIGSTOP)
        print("PWNED")
        """,
        verdicts=TLE,
        max_seconds=1.0 + KILL_GRACE_S + 3.0,
    ),
    Case(
        "sigstop_zygote",
        ZYGOTE_STATE
        + textwrap.dedent(
            """
        os.kill(os.getppid(), signal.SIGSTOP)
        time.sleep(0.2)
        report_zygote()
        """
        ),
        max_seconds=1.0 + KILL_GRACE_S + 3.0,
    ),
    Case(
        "sigstop_everything",
        ZYGOTE_STATE
        + textwrap.dedent(
            """
        os.kill(-1, signal.SIGSTOP)
        time.sleep(0.2)
        report_zygote()
        """
        ),
        max_seconds=1.0 + KILL_GRACE_S + 3.0,
    ),
    # A22 and A8: daemons and zombies.
    Case(
        # If the daemon outlived the test, its PWNED would reach stdout after 0.3 s.
        "orphaned_daemon",
        """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(0.3)
                os.write(1, b"PWNED\\n")
                time.sleep(60)
            os._exit(0)
        os.wait()
        """,
        limits={"wall_s": 2.0, "memory_mb": 128, "output_kb": 64},
    ),
    Case(
        "detached_daemon_and_zombies",
        """
        import os, signal, time
        for _ in range(20):
            if os.fork() == 0:
                os._exit(0)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                os.closerange(0, 1024)
                time.sleep(60)
            os._exit(0)
        time.sleep(0.1)
        print("daemon started")
        """,
    ),
    # A13/A18: kernel attack surface, other processes' memory.
    _syscall_case(
        "ptrace",
        """
        sc("ptrace(TRACEME)", 101, 0, 0, 0, 0)
        sc("ptrace(ATTACH zygote)", 101, 16, os.getppid(), 0, 0)
        sc("ptrace(ATTACH init)", 101, 16, 1, 0, 0)
        sc("ptrace(SEIZE init)", 101, 0x4206, 1, 0, 0)
        """,
    ),
    _syscall_case(
        "process_vm_readv",
        """
        class IoVec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

        buf = ctypes.create_string_buffer(64)
        for pid in (1, 2):
            try:
                with open("/proc/%d/maps" % pid) as fh:
                    address = int(fh.readline().split("-")[0], 16)
            except OSError:
                address = 0x400000
            local = IoVec(ctypes.cast(buf, ctypes.c_void_p), 64)
            remote = IoVec(address, 64)
            sc("process_vm_readv(%d)" % pid, 310, pid, ctypes.byref(local), 1,
               ctypes.byref(remote), 1, 0)
            sc("process_vm_writev(%d)" % pid, 311, pid, ctypes.byref(local), 1,
               ctypes.byref(remote), 1, 0)
        """,
    ),
    _syscall_case(
        "pidfd_getfd_zygote_socket",
        """
        pidfd = os.pidfd_open(os.getppid())
        for target in (3, 50, 51):
            sc("pidfd_getfd(zygote, %d)" % target, 438, pidfd, target, 0)
        """,
    ),
    _syscall_case(
        "mount_chroot_pivot_root",
        """
        os.makedirs("/tmp/run/m", exist_ok=True)
        sc("mount(tmpfs)", 165, b"none", b"/tmp/run/m", b"tmpfs", 0, 0)
        sc("mount(remount / rw)", 165, b"none", b"/", None, 0x20, 0)
        sc("mount(bind /proc)", 165, b"/proc", b"/tmp/run/m", None, 0x1000, 0)
        sc("umount2(/proc)", 166, b"/proc", 2)
        sc("chroot", 161, b"/tmp/run")
        sc("pivot_root", 155, b"/tmp/run", b"/tmp/run/m")
        sc("fsopen", 430, b"tmpfs", 0)
        sc("open_tree", 428, -100, b"/", 1)
        """,
    ),
    _syscall_case(
        "unshare_setns_clone_newuser",
        """
        sc("unshare(NEWUSER)", 272, 0x10000000)
        sc("unshare(NEWNS)", 272, 0x00020000)
        sc("unshare(NEWNET)", 272, 0x40000000)
        for path in ("/proc/1/ns/net", "/proc/1/ns/user", "/proc/2/ns/mnt"):
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError as exc:
                results.append((path, -1, str(exc)))
                continue
            sc("setns(%s)" % path, 308, fd, 0)
        pid = sc("clone(NEWUSER)", 56, 0x10000000 | 17, 0, 0, 0, 0)
        if pid == 0:
            os._exit(0)
        if pid > 0:
            os.waitpid(pid, 0)
        args = (ctypes.c_uint64 * 11)(0x10000000, 0, 0, 0, 17)
        pid = sc("clone3(NEWUSER)", 435, args, 88)
        if pid == 0:
            os._exit(0)
        """,
    ),
    _syscall_case(
        "bpf",
        """
        attr = (ctypes.c_uint32 * 32)(2, 4, 4, 1)
        sc("bpf(MAP_CREATE)", 321, 0, attr, 128)
        insns = (ctypes.c_uint64 * 2)(0xB7, 0x95)  # r0 = 0; exit
        license = ctypes.create_string_buffer(b"GPL")
        prog = (ctypes.c_uint64 * 16)()
        ctypes.memmove(prog, (ctypes.c_uint32 * 2)(1, 2), 8)  # SOCKET_FILTER, 2 insns
        prog[1] = ctypes.addressof(insns)
        prog[2] = ctypes.addressof(license)
        sc("bpf(PROG_LOAD)", 321, 5, prog, 128)
        """,
    ),
    _syscall_case(
        "io_uring",
        """
        params = (ctypes.c_ubyte * 120)()
        fd = sc("io_uring_setup", 425, 4, params)
        sc("io_uring_enter", 426, max(fd, 0), 0, 0, 0, 0, 0)
        sc("io_uring_register", 427, max(fd, 0), 0, 0, 0)
        """,
    ),
    _syscall_case(
        "keyctl",
        """
        sc("keyctl(JOIN_SESSION_KEYRING)", 250, 1, 0)
        sc("keyctl(GET_KEYRING_ID)", 250, 0, -3, 1)
        sc("add_key", 248, b"user", b"cobalt", b"secret", 6, -2)
        sc("request_key", 249, b"user", b"cobalt", None, 0)
        """,
    ),
    _syscall_case(
        "userfaultfd_perf_event_personality",
        """
        sc("userfaultfd", 323, 0)
        attr = (ctypes.c_uint32 * 32)(1, 128)  # PERF_TYPE_SOFTWARE, size 128, cpu-clock
        sc("perf_event_open", 298, attr, 0, -1, -1, 0)
        sc("personality(ADDR_NO_RANDOMIZE)", 135, 0x0040000)
        sc("open_by_handle_at", 304, -100, None, 0)
        sc("syslog", 103, 3, None, 0)
        """,
    ),
    Case(
        # Non-dumpable protects the zygote from being read, not from prlimit(): a test
        # that lowered its hard limits would break every later test on the slot.
        "prlimit_zygote",
        """
        import resource, sys
        try:
            # Its /proc/1/status is masked: a generous cap it would survive, if allowed.
            cap = 4 << 30
            resource.prlimit(1, resource.RLIMIT_AS, (cap, cap))
        except (OSError, ValueError, IndexError) as exc:
            print(exc, file=sys.stderr)
        else:
            print("PWNED")
        """,
    ),
    Case(
        "pid1_takeover_via_proc_mem",
        PID1_TAKEOVER.replace("@ESCAPE@", "0"),
        limits={**QUICK, "wall_s": 2.0},
    ),
    Case(
        # Same, then cut the jail loose from the server: see attacks/pid1_takeover.py.
        "pid1_takeover_outlives_jail",
        PID1_TAKEOVER.replace("@ESCAPE@", "1"),
        limits={**QUICK, "wall_s": 2.0},
    ),
    # A19: verdict forgery in call-based tests (solve(2, 3) must return 5).
    Case("forge_sys_exit_at_module_level", "import sys\nsys.exit(0)", call=True),
    Case("forge_os_exit_at_module_level", "import os\nos._exit(0)", call=True),
    Case(
        "forge_eq_always_true",
        """
        class Anything:
            def __eq__(self, other):
                return True
            __hash__ = object.__hash__

        def solve(a, b):
            return Anything()
        """,
        call=True,
    ),
    Case(
        "forge_list_subclass_eq",
        """
        class Sneaky(list):
            def __eq__(self, other):
                return True

        def solve(a, b):
            return Sneaky()
        """,
        call=True,
    ),
    Case(
        "forge_record_on_stdout",
        """
        import sys
        def solve(a, b):
            for n in range(3):
                print("%032x {\\"status\\": \\"returned\\"}" % n)
                print("5")
            sys.stdout.flush()
            return None
        """,
        call=True,
    ),
    Case(
        "forge_record_on_fd3_and_close",
        """
        import os
        def solve(a, b):
            os.write(3, b'0123456789abcdef0123456789abcdef {"status": "returned"}\\n5')
            os.close(3)
            return None
        """,
        call=True,
    ),
    Case(
        # The nonce is reachable from the harness's frame, but a record is only a claim
        # about the returned value: the server still compares it with the expected one.
        "forge_record_with_stolen_nonce",
        """
        import os, sys
        frame, nonce = sys._getframe(0), None
        while frame is not None and nonce is None:
            nonce = frame.f_locals.get("nonce")
            frame = frame.f_back
        if nonce:
            os.write(3, (nonce + ' {"status": "returned", "verdict": "accepted"}\\n'
                         + '"forged"').encode())
            os._exit(0)
        def solve(a, b):
            return None
        """,
        call=True,
    ),
    Case(
        "forge_json_dumps_override",
        """
        import json
        def fake_dumps(value, *args, **kwargs):
            if isinstance(value, dict):
                return '{"status": "returned", "verdict": "accepted"}'
            return '"accepted"'
        json.dumps = fake_dumps
        def solve(a, b):
            return None
        """,
        call=True,
    ),
    Case(
        "forge_raise_inside_function",
        "def solve(a, b):\n    raise ValueError('no idea')",
        call=True,
        verdicts=("runtime_error",),
    ),
    Case(
        "forge_sys_exit_inside_function",
        "import sys\ndef solve(a, b):\n    sys.exit(0)",
        call=True,
        verdicts=("runtime_error",),
    ),
    Case(
        "forge_alarm_disabled_then_spin",
        """
        import signal
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        signal.alarm(0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        def solve(a, b):
            while True:
                pass
        """,
        call=True,
        verdicts=TLE,
    ),
    Case(
        "forge_alarm_handler_exits_zero",
        """
        import os, signal
        signal.signal(signal.SIGALRM, lambda *args: os._exit(0))
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        def solve(a, b):
            while True:
                pass
        """,
        call=True,
    ),
    Case("forge_stdin_test_exit_zero_silently", "import os\nos._exit(0)"),
    # A19: blame shifting. sandbox_error means "the infrastructure failed: retry or mask,
    # never reward 0" (docs/executor.md), so a program must not be able to cause it.
    Case("forge_sandbox_error_null_byte", "print('PWNED')\0\n"),
    Case("forge_sandbox_error_compile_recursion", "x = " + "1+" * 200_000 + "1\n"),
    Case("forge_sandbox_error_parser_memory", "x = " + "-" * 100_000 + "1\n"),
    # Issue 18, class 6: nothing in /proc tells a test what ran before it or elsewhere.
    Case(
        "activity_side_channels",
        ACTIVITY_PROBE + "if visible:\n    print('PWNED')\n",
        verdicts=("wrong_answer",),
    ),
    # A20: huge inputs.
    Case(
        "huge_stdin_unread",
        "import time\ntime.sleep(60)",
        stdin="1 " * (4 << 20),
        verdicts=TLE,
        max_seconds=5.0,
    ),
    Case(
        "huge_stdin_echoed",
        "import sys\nsys.stdout.write(sys.stdin.read())",
        stdin="12345678\n" * (1 << 20),
        limits={"wall_s": 3.0, "memory_mb": 256, "output_kb": 1024},
        verdicts=("output_limit",),
    ),
    Case(
        "huge_code",
        "x = 1\n" * 500_000 + "while True:\n    pass\n",
        limits={"wall_s": 2.0, "memory_mb": 256, "output_kb": 64},
    ),
]


PERSISTENCE = {
    "tmp_file": (
        "open('/tmp/persist-@TOKEN@', 'w').write('@TOKEN@')",
        "print(open('/tmp/persist-@TOKEN@').read())",
    ),
    "workdir_file": (
        "open('persist-@TOKEN@', 'w').write('@TOKEN@')",
        "print(open('persist-@TOKEN@').read())",
    ),
    "dev_shm_file": (
        "open('/dev/shm/persist-@TOKEN@', 'w').write('@TOKEN@')",
        "print(open('/dev/shm/persist-@TOKEN@').read())",
    ),
    "dev_file": (
        "open('/dev/persist-@TOKEN@', 'w').write('@TOKEN@')",
        "print(open('/dev/persist-@TOKEN@').read())",
    ),
    "root_dir_file": (
        "open('/persist-@TOKEN@', 'w').write('@TOKEN@')",
        "print(open('/persist-@TOKEN@').read())",
    ),
    "sysv_shm": (
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        shmid = libc.shmget(0x5EED, 4096, 0o1600)
        address = libc.shmat(shmid, None, 0)
        ctypes.memmove(address, b"@TOKEN@", 12)
        libc.shmdt(ctypes.c_void_p(address))
        """,
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.shmat.restype = ctypes.c_void_p
        shmid = libc.shmget(0x5EED, 0, 0)
        if shmid >= 0:
            address = libc.shmat(shmid, None, 0)
            print(ctypes.string_at(address, 12).decode())
        """,
    ),
    "posix_mqueue": (
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        mq = libc.mq_open(b"/cobalt-@TOKEN@", 0o102, 0o600, None)  # O_CREAT | O_RDWR
        libc.mq_send(mq, b"@TOKEN@", 12, 0)
        """,
        """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        mq = libc.mq_open(b"/cobalt-@TOKEN@", 0o4000)  # O_RDONLY | O_NONBLOCK
        if mq >= 0:
            buf = ctypes.create_string_buffer(8192)
            size = libc.mq_receive(mq, buf, 8192, None)
            if size > 0:
                print(buf.raw[:size].decode())
        """,
    ),
}
