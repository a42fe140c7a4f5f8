"""Watching the jails from the host: leaked processes, host listeners, a fresh jail's state.

The red-team suites (tests/executor/test_attacks.py for Python programs,
test_language_attacks.py for the compiled and other runtimes) judge the aftermath of an
attack the same way: the jails read as fresh ones (`JAIL_PROBE`, both slots), no process
of the sandbox uids lives on the host outside the live jails, nothing reached a host
socket, and no file an attack aimed at appeared on the host.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from cobalt.executor.pool import SandboxPool
from tests.executor.helpers import execute, verdicts
from tests.support.attacks import JAIL_PROBE, PROBE_LIMITS, SETTLE_S, TOKEN, probe_failure

__all__ = [
    "assert_no_leaked_processes",
    "assert_nothing_reached",
    "check_aftermath",
    "fresh_jail_state",
    "host_listeners",
    "kill_our_leaked_processes",
    "leaked_processes",
    "process_table",
    "recycle_jails",
]


def process_table() -> dict[int, tuple[int, int, str, str]]:
    """pid -> (ppid, real uid, name, state) for every process on the host."""
    table: dict[int, tuple[int, int, str, str]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as fh:
                text = fh.read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
        try:
            table[int(entry)] = (
                int(fields["PPid"].split()[0]),
                int(fields["Uid"].split()[0]),
                fields["Name"].strip(),
                fields["State"].strip(),
            )
        except (KeyError, IndexError, ValueError):
            continue
    return table


def leaked_processes(pool: SandboxPool) -> dict[int, str]:
    """Host processes of the sandbox uids that are not inside one of our live jails.

    A process is inside a jail when walking up its parents through sandbox-uid processes
    reaches one of `pool.live_pids()` (the bwrap processes). Jails of *another* executor
    on this machine (another test run uses the same uids) are recognised by their bwrap
    having a living parent that is neither us nor the host's init, and are ignored, as
    are zombies (dead, awaiting their parent's wait()).
    """
    uids = pool.sandbox_uids()
    if not uids:
        return {}
    table = process_table()
    roots = pool.live_pids()
    me = os.getpid()
    leaked: dict[int, str] = {}
    for pid, (ppid, uid, name, state) in table.items():
        # A zombie has already died; one reparented to the host's init (the inner bwrap of
        # a jail just closed) is only waiting for that init to reap it.
        if uid not in uids or state.startswith("Z"):
            continue
        top, seen = pid, set()
        while top not in roots and top not in seen:
            seen.add(top)
            parent = table.get(table[top][0]) if top in table else None
            if parent is None or parent[1] not in uids:
                break
            top = table[top][0]
        if top in roots:
            continue
        owner = table[top][0] if top in table else 0
        if table.get(top, (0, 0, "", ""))[2] == "bwrap" and owner in table and owner not in (me, 1):
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read()[:120].replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            cmdline = "?"
        leaked[pid] = f"{name} state={state} ppid={ppid} uid={uid} cmdline={cmdline!r}"
    return leaked


def assert_no_leaked_processes(pool: SandboxPool) -> None:
    deadline = time.monotonic() + SETTLE_S
    leaked = leaked_processes(pool)
    while leaked and time.monotonic() < deadline:
        time.sleep(0.05)
        leaked = leaked_processes(pool)
    assert not leaked, f"sandbox-uid processes outside the live jails: {leaked}"


def kill_our_leaked_processes(pool: SandboxPool) -> None:
    """SIGKILL, by pid, leaked sandbox-uid processes that carry this run's TOKEN."""
    time.sleep(0.2)
    for pid in leaked_processes(pool):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                ours = TOKEN.encode() in fh.read()
            if ours:
                os.kill(pid, signal.SIGKILL)
        except OSError:
            continue


def recycle_jails(pool: SandboxPool) -> None:
    """Stop every (idle) jail; the pool starts a fresh one on the slot's next use."""
    for slot in pool.slots:
        slot.close()


def fresh_jail_state(client: TestClient, pool: SandboxPool) -> str:
    """What the jail probe prints on fresh jails (both slots must agree)."""
    recycle_jails(pool)
    probe = {"stdin": "", "expected_stdout": "<baseline>"}
    body = execute(client, JAIL_PROBE, [probe, probe], limits=PROBE_LIMITS, stream_chars=1 << 16)
    outputs: list[str] = [result["stdout"] for result in body["results"]]
    assert verdicts(body) == ["wrong_answer", "wrong_answer"], body
    assert outputs[0] == outputs[1], outputs
    # The zygote is the jail's init (pid 1); nothing else runs between tests.
    assert "proc 1 " in outputs[0], outputs[0]
    return outputs[0]


@contextmanager
def host_listeners() -> Iterator[SimpleNamespace]:
    """Host-side sockets the sandbox must never reach: TCP, UDP, abstract and path UNIX."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(16)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    abstract_name = f"cobalt-attack-{TOKEN}"
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0{abstract_name}")
    abstract.listen(16)
    unix_path = f"/tmp/cobalt-attack-{TOKEN}.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(unix_path)
    os.chmod(unix_path, 0o777)
    unix.listen(16)
    sockets = [tcp, udp, abstract, unix]
    for sock in sockets:
        sock.setblocking(False)
    try:
        yield SimpleNamespace(
            tcp=tcp,
            udp=udp,
            abstract=abstract,
            unix=unix,
            unix_path=unix_path,
            abstract_name=abstract_name,
            tcp_port=tcp.getsockname()[1],
            udp_port=udp.getsockname()[1],
        )
    finally:
        for sock in sockets:
            sock.close()
        os.unlink(unix_path)


def assert_nothing_reached(listeners: SimpleNamespace) -> None:
    for name in ("tcp", "abstract", "unix"):
        with pytest.raises(BlockingIOError):
            conn, peer = getattr(listeners, name).accept()
            conn.close()
            pytest.fail(f"the sandbox connected to the host's {name} listener from {peer!r}")
    with pytest.raises(BlockingIOError):
        data = listeners.udp.recv(65536)
        pytest.fail(f"the sandbox sent a UDP datagram to the host: {data[:80]!r}")


def check_aftermath(
    client: TestClient,
    pool: SandboxPool,
    baseline: str,
    host_paths: tuple[str, ...] = (),
) -> None:
    """The service answers, both jails are as new, nothing leaked or landed on the host."""
    for path in host_paths:
        assert not os.path.lexists(path), f"the attack created {path} on the host"
    assert client.get("/healthz").status_code == 200
    probe = {"stdin": "", "expected_stdout": baseline}
    body = execute(client, JAIL_PROBE, [probe, probe], limits=PROBE_LIMITS, stream_chars=1 << 16)
    for result in body["results"]:
        assert result["verdict"] == "accepted", probe_failure(baseline, result)
    assert_no_leaked_processes(pool)
