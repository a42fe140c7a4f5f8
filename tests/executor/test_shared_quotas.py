"""No request changes a neighbour's verdict through a kernel quota (issue 48, class 5).

Where slots share a uid (the non-root mode the k8s and compose pods run), the kernel
counts some resources per uid: pipe pages (past the soft quota every new pipe of the
uid holds 4 KiB), file descriptors in flight over unix sockets (past the sender's
RLIMIT_NOFILE every fd passing fails with ETOOMANYREFS), inotify instances and watches,
and message queues. Tests get a bounded share or none: pipes are counted per test, and
FIFOs, fd passing, inotify, dnotify, flock and message queues are denied to tests.

The property: one slot exhausts a randomly chosen quota as far as it can while the other
judges known programs (pipes at full capacity, subprocesses, threads over a socket
pair); the known programs' verdicts are `accepted`, in both uid modes.
"""

from __future__ import annotations

import textwrap

import httpx
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

HOG_PROCESSES = 8
"""Processes of the hog, each taking what it can (a test has 64 processes, 256 fds each)."""
HOLD_S = 2.0
"""How long the hog keeps what it took; the known programs run inside that window."""

HOGS = {
    "fifos": """
        import os
        for i in range(COUNT):
            path = f"/tmp/fifo{os.getpid()}-{i}"
            try:
                os.mkfifo(path)
                held.append(os.open(path, os.O_RDWR | os.O_NONBLOCK))
            except OSError:
                break
    """,
    "pipes": """
        import os
        for i in range(COUNT):
            try:
                r, w = os.pipe()
            except OSError:
                break
            os.set_blocking(w, False)
            try:
                os.write(w, b"x" * 65536)
            except OSError:
                pass
            held += [r, w]
            if len(held) > 200:
                os.close(held.pop(0))
    """,
    "fds_in_flight": """
        import os, socket
        for i in range(COUNT):
            try:
                a, b = socket.socketpair()
                socket.send_fds(a, [b"x"], [a.fileno()] * 200)
                held.append((a, b))
            except OSError:
                break
    """,
    "inotify": """
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        held.extend(libc.inotify_init() for _ in range(min(COUNT, 200)))
        for fd in held:
            if fd >= 0:
                libc.inotify_add_watch(fd, b"/usr/lib", 0xFFF)
    """,
    "locks": """
        import fcntl, glob
        for path in glob.glob("/usr/lib/python3*/*.py")[:COUNT]:
            f = open(path)
            for call in (lambda: fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB),
                         lambda: fcntl.fcntl(f, fcntl.F_NOTIFY, fcntl.DN_ACCESS)):
                try:
                    call()
                except OSError:
                    pass
            held.append(f)
    """,
}

KNOWN = {
    # A fresh pipe holds 64 KiB: past the uid's quota it would hold 4 KiB.
    "pipe capacity": (
        "import os\nr, w = os.pipe()\nos.set_blocking(w, False)\n"
        "print(os.write(w, b'x' * 65536))\n",
        "65536",
    ),
    "subprocess": (
        "import subprocess, sys\n"
        "out = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True)\n"
        "print(out.stdout.decode().strip())\n",
        "42",
    ),
    "socket pair": (
        "import socket, threading\na, b = socket.socketpair()\ngot = []\n"
        "def read():\n    n = 0\n    while n < 1 << 20:\n        n += len(b.recv(65536))\n"
        "    got.append(n)\nt = threading.Thread(target=read)\nt.start()\n"
        "a.sendall(b'y' * (1 << 20))\nt.join()\nprint(got[0])\n",
        str(1 << 20),
    ),
}


def hog_program(kinds: set[str], count: int) -> str:
    """One program taking each of `kinds` in turn (up to `count` of each) in each of
    `HOG_PROCESSES` processes (one process has only 256 fds), then holding all it got
    while the neighbour runs."""
    bodies = [
        f"held_{kind} = []\ntry:\n"
        + textwrap.indent(textwrap.dedent(HOGS[kind]), "    ")
        .replace("COUNT", str(count))
        .replace("held", f"held_{kind}")
        + "except OSError:\n    pass  # it took all it could\n"
        for kind in sorted(kinds)
    ]
    take = textwrap.indent("\n".join(bodies), "    ")
    return (
        f"import os, time\nfor worker in range({HOG_PROCESSES}):\n"
        "    if os.fork() == 0:\n        break\nelse:\n    worker = -1\n"
        f"if True:\n{take}\ntime.sleep({HOLD_S})\n"
        "if worker >= 0:\n    os._exit(0)\nprint('held')\n"
    )


def known_request() -> dict[str, object]:
    """The known programs, each one test, after the hog has had time to take its fill."""
    code = "import time, sys\ntime.sleep(0.6)\nexec(sys.stdin.read())\n"
    return {
        "code": code,
        "tests": [{"stdin": program, "expected_stdout": out} for program, out in KNOWN.values()],
        "limits": {"wall_s": 5.0, "memory_mb": 256},
    }


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.sets(st.sampled_from(sorted(HOGS)), min_size=1), count=st.integers(100, 3000))
@example(kinds=set(HOGS), count=3000)
def test_a_slot_exhausting_a_quota_changes_no_neighbours_verdict(
    executor_http: httpx.Client, kinds: set[str], count: int
) -> None:
    hog = {
        "code": hog_program(kinds, count),
        "tests": [{"stdin": "", "expected_stdout": "held"}],
        "limits": {"wall_s": 6.0, "memory_mb": 256},
    }
    response = executor_http.post("/v1/execute/batch", json={"requests": [hog, known_request()]})
    assert response.status_code == 200, response.text
    hogged, known = response.json()["results"]
    assert hogged["results"][0]["verdict"] in ("accepted", "runtime_error"), hogged
    verdicts = {
        name: (result["verdict"], result["stdout"][-200:], result["stderr"][-300:])
        for name, result in zip(KNOWN, known["results"], strict=True)
    }
    assert all(v[0] == "accepted" for v in verdicts.values()), (kinds, count, verdicts)


def test_quota_taking_calls_are_denied_to_tests(executor_http: httpx.Client) -> None:
    """What the property relies on, named: each way into a shared quota fails cleanly,
    and so do the cheap side channels (sysinfo's host-wide counts, lock queries on the
    shared read-only files)."""
    probe = textwrap.dedent(
        """
        import ctypes, fcntl, os, socket
        libc = ctypes.CDLL(None, use_errno=True)
        def denied(call):
            try:
                call()
            except OSError:
                return "denied"
            return "allowed"
        a, b = socket.socketpair()
        f = open(os.__file__)  # the read-only standard library every slot shares
        print(denied(lambda: os.mkfifo("/tmp/f")),
              denied(lambda: socket.send_fds(a, [b"x"], [0])),
              denied(lambda: fcntl.flock(f, fcntl.LOCK_SH)),
              denied(lambda: fcntl.fcntl(os.open("/usr", os.O_RDONLY), fcntl.F_NOTIFY, 1)),
              "denied" if libc.inotify_init() < 0 else "allowed",
              "denied" if libc.sysinfo(ctypes.create_string_buffer(256)) < 0 else "allowed",
              denied(lambda: fcntl.fcntl(f, fcntl.F_GETLK, bytes(32))))
        """
    )
    response = executor_http.post(
        "/v1/execute",
        json={"code": probe, "tests": [{"stdin": "", "expected_stdout": "denied " * 6 + "denied"}]},
    )
    result = response.json()["results"][0]
    assert result["verdict"] == "accepted", result
