"""Attack suite: hostile programs sent through HTTP to the real sandbox.

Each case is one attack from the executor's threat list (anchors-executor.md, section 2:
A1-A22). After every attack we check that

(a) the attack was not judged "accepted" (attack programs print PWNED, the expected
    output, only if the attack worked, or never finish when the sandbox holds),
(b) the service still answers: GET /healthz is 200 and a follow-up program on *both*
    jails is accepted. That program (attacks/jail_probe.py) describes the jail (files
    outside the wiped directories, processes, SysV IPC objects, the rlimits of the
    jail's init and zygote) and must print exactly what it printed on fresh jails at the
    start of the module, so nothing an attack left behind goes unnoticed,
(c) no process of the sandbox uids exists on the host outside the live jails' process
    trees (killed processes are reaped asynchronously, so this polls for a few seconds),
(d) where an attack tried to create a file, nothing appeared at that path on the host.

A case that fails here is a weakness of the sandbox, not of the test: do not weaken it.
When a case fails, its jails are restarted afterwards so the next case starts clean.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cobalt.executor.pool import SandboxPool
from tests.executor.helpers import execute, verdicts
from tests.support.attacks import (
    CASES,
    JAIL_PROBE,
    PERSISTENCE,
    PROBE_LIMITS,
    PWNED,
    QUICK,
    SETTLE_S,
    TOKEN,
    Case,
    fill_program,
    probe_failure,
)

# --- host-side observation ------------------------------------------------------------


def _process_table() -> dict[int, tuple[int, int, str, str]]:
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


def _leaked_processes(pool: SandboxPool) -> dict[int, str]:
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
    table = _process_table()
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


def _assert_no_leaked_processes(pool: SandboxPool) -> None:
    deadline = time.monotonic() + SETTLE_S
    leaked = _leaked_processes(pool)
    while leaked and time.monotonic() < deadline:
        time.sleep(0.05)
        leaked = _leaked_processes(pool)
    assert not leaked, f"sandbox-uid processes outside the live jails: {leaked}"


def _kill_our_leaked_processes(pool: SandboxPool) -> None:
    """SIGKILL, by pid, leaked sandbox-uid processes that carry this run's TOKEN."""
    time.sleep(0.2)
    for pid in _leaked_processes(pool):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                ours = TOKEN.encode() in fh.read()
            if ours:
                os.kill(pid, signal.SIGKILL)
        except OSError:
            continue


def _recycle_jails(pool: SandboxPool) -> None:
    """Stop every (idle) jail; the pool starts a fresh one on the slot's next use."""
    for slot in pool.slots:
        slot.close()


# --- fixtures -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def baseline(executor_client: TestClient, sandbox_pool: SandboxPool) -> str:
    """What the jail probe prints on fresh jails (both slots must agree)."""
    _recycle_jails(sandbox_pool)
    probe = {"stdin": "", "expected_stdout": "<baseline>"}
    body = execute(
        executor_client, JAIL_PROBE, [probe, probe], limits=PROBE_LIMITS, stream_chars=1 << 16
    )
    outputs = [result["stdout"] for result in body["results"]]
    assert verdicts(body) == ["wrong_answer", "wrong_answer"], body
    assert outputs[0] == outputs[1], outputs
    # The zygote is the jail's init (pid 1); nothing else runs between tests.
    assert "proc 1 " in outputs[0], outputs[0]
    return outputs[0]


@pytest.fixture(scope="module")
def listeners() -> Iterator[SimpleNamespace]:
    """Host-side sockets the sandbox must never reach: TCP, UDP, abstract and path UNIX."""
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(16)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(f"\0cobalt-attack-{TOKEN}")
    abstract.listen(16)
    unix_path = f"/tmp/cobalt-attack-{TOKEN}.sock"
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(unix_path)
    os.chmod(unix_path, 0o777)
    unix.listen(16)
    sockets = [tcp, udp, abstract, unix]
    for sock in sockets:
        sock.setblocking(False)
    yield SimpleNamespace(
        tcp=tcp,
        udp=udp,
        abstract=abstract,
        unix=unix,
        unix_path=unix_path,
        tcp_port=tcp.getsockname()[1],
        udp_port=udp.getsockname()[1],
    )
    for sock in sockets:
        sock.close()
    os.unlink(unix_path)


def _assert_nothing_reached(listeners: SimpleNamespace) -> None:
    for name in ("tcp", "abstract", "unix"):
        with pytest.raises(BlockingIOError):
            conn, peer = getattr(listeners, name).accept()
            conn.close()
            pytest.fail(f"the sandbox connected to the host's {name} listener from {peer!r}")
    with pytest.raises(BlockingIOError):
        data = listeners.udp.recv(65536)
        pytest.fail(f"the sandbox sent a UDP datagram to the host: {data[:80]!r}")


@pytest.fixture
def guard(sandbox_pool: SandboxPool) -> Iterator[SimpleNamespace]:
    """Restart the jails after a case that did not pass, so failures do not cascade."""
    state = SimpleNamespace(passed=False)
    yield state
    if not state.passed:
        _recycle_jails(sandbox_pool)
        _kill_our_leaked_processes(sandbox_pool)


def _check_aftermath(
    client: TestClient,
    pool: SandboxPool,
    baseline: str,
    host_paths: tuple[str, ...] = (),
) -> None:
    """(b), (c) and (d): the service answers, jails are as new, nothing leaked or landed."""
    for path in host_paths:
        assert not os.path.lexists(path), f"the attack created {path} on the host"
    assert client.get("/healthz").status_code == 200
    probe = {"stdin": "", "expected_stdout": baseline}
    body = execute(client, JAIL_PROBE, [probe, probe], limits=PROBE_LIMITS, stream_chars=1 << 16)
    for result in body["results"]:
        assert result["verdict"] == "accepted", probe_failure(baseline, result)
    _assert_no_leaked_processes(pool)


@pytest.mark.parametrize("case", [pytest.param(case, id=case.id) for case in CASES])
def test_attack(
    case: Case,
    executor_client: TestClient,
    sandbox_pool: SandboxPool,
    baseline: str,
    listeners: SimpleNamespace,
    guard: SimpleNamespace,
) -> None:
    host_pids = sorted({os.getpid(), os.getppid(), *sandbox_pool.live_pids()})
    code = fill_program(
        case.code,
        TCP_PORT=listeners.tcp_port,
        UDP_PORT=listeners.udp_port,
        UNIX_PATH=listeners.unix_path,
        HOST_PIDS=[pid for pid in host_pids if pid > 300],
    )
    if case.call:
        test: dict[str, Any] = {"fn_name": "solve", "args": [2, 3], "expected": 5}
    else:
        test = {"stdin": case.stdin, "expected_stdout": PWNED}
    began = time.monotonic()
    body = execute(executor_client, code, [test], limits=case.limits)
    elapsed = time.monotonic() - began
    result = body["results"][0]
    summary = (
        f"{result['verdict']} exit={result['exit_code']} signal={result['signal']} "
        f"stdout={result['stdout'][:300]!r} stderr={result['stderr'][-600:]!r}"
    )
    assert result["verdict"] != "accepted", f"the attack worked: {summary}"
    assert result["verdict"] != "sandbox_error", (
        f"the program made its own failure look like the infrastructure's: {summary}"
    )
    if case.verdicts:
        assert result["verdict"] in case.verdicts, summary
    if case.max_seconds is not None:
        assert elapsed < case.max_seconds, f"answered after {elapsed:.2f} s: {summary}"
    _assert_nothing_reached(listeners)
    _check_aftermath(executor_client, sandbox_pool, baseline, case.host_paths)
    guard.passed = True


# --- cases that need more than one request --------------------------------------------


@pytest.mark.parametrize("channel", list(PERSISTENCE))
def test_nothing_persists_to_the_next_request(
    channel: str,
    executor_client: TestClient,
    sandbox_pool: SandboxPool,
    baseline: str,
    guard: SimpleNamespace,
) -> None:
    """A8/A17: what one request leaves in its jail is gone for the next one.

    The reader runs twice in one request, which uses both slots (the pool hands out idle
    slots in FIFO order), so one of them runs in the writer's jail.
    """
    writer, reader = (fill_program(source) for source in PERSISTENCE[channel])
    written = {"stdin": "", "expected_stdout": "written"}
    wrote = execute(executor_client, writer + "print('written')\n", [written])
    # Either the channel is closed outright (read-only root and /dev, no SysV IPC) and the
    # writer fails, or it works and the next request must not see what it left.
    if verdicts(wrote) != ["accepted"]:
        blocked = wrote["results"][0]["stderr"]
        assert (
            any(
                reason in blocked
                for reason in (
                    "Read-only file system",
                    "Operation not permitted",
                    "PermissionError",
                )
            )
            or wrote["results"][0]["signal"] is not None
        ), wrote["results"][0]
    read_test = {"stdin": "", "expected_stdout": TOKEN}
    body = execute(executor_client, reader, [read_test, read_test], limits=QUICK)
    assert "accepted" not in verdicts(body), (
        f"a later request read what an earlier one left in {channel}: {body['results']}"
    )
    _check_aftermath(executor_client, sandbox_pool, baseline)
    guard.passed = True


def test_server_environment_is_invisible(
    executor_client: TestClient,
    sandbox_pool: SandboxPool,
    baseline: str,
    guard: SimpleNamespace,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A10: a secret in the server's environment never reaches the program."""
    secret = secrets.token_hex(16)
    monkeypatch.setenv("COBALT_ATTACK_SECRET", secret)
    _recycle_jails(sandbox_pool)  # jails started from now on inherit nothing of this env
    code = fill_program(
        """
        import glob, os, re, sys
        texts = [repr(dict(os.environ))]
        for path in (glob.glob("/proc/*/environ") + glob.glob("/proc/*/task/*/environ")
                     + glob.glob("/proc/*/cmdline")):
            try:
                with open(path, "rb") as fh:
                    texts.append(fh.read().decode("latin-1"))
            except OSError as exc:
                texts.append("%s: %s" % (path, exc))
        blob = "\\n".join(texts)
        found = re.findall(r"COBALT_ATTACK_SECRET=([0-9a-f]+)", blob)
        print(found[0] if found else "not found")
        print(blob[-3000:], file=sys.stderr)
        """
    )
    test = {"stdin": "", "expected_stdout": secret}
    body = execute(executor_client, code, [test, test], limits=QUICK, stream_chars=1 << 16)
    for result in body["results"]:
        assert result["verdict"] != "accepted"
        assert secret not in result["stdout"] and secret not in result["stderr"]
        assert "COBALT_ATTACK_SECRET" not in result["stderr"]
    _check_aftermath(executor_client, sandbox_pool, baseline)
    guard.passed = True


def test_attack_cannot_touch_a_neighbour(
    executor_client: TestClient,
    sandbox_pool: SandboxPool,
    baseline: str,
    guard: SimpleNamespace,
) -> None:
    """A12/A17: while one jail runs a victim, the other jail's program kills and stops
    everything it can see; the victim is unaffected."""
    victim = {
        "code": "import time\ntime.sleep(0.8)\nprint(42)",
        "tests": [{"stdin": "", "expected_stdout": "42"}],
        "limits": {"wall_s": 3.0, "memory_mb": 128},
    }
    attacker = {
        "code": fill_program(
            """
            import os, signal, time
            end = time.time() + 1.0
            while time.time() < end:
                for pid in [-1] + list(range(1, 400)):
                    for sig in (signal.SIGSTOP, signal.SIGKILL):
                        try:
                            os.kill(pid, sig)
                        except OSError:
                            pass
            print("PWNED")
            """
        ),
        "tests": [{"stdin": "", "expected_stdout": PWNED}],
        "limits": {"wall_s": 2.0, "memory_mb": 128},
    }
    response = executor_client.post("/v1/execute/batch", json={"requests": [victim, attacker]})
    assert response.status_code == 200, response.text
    victim_body, attacker_body = response.json()["results"]
    assert verdicts(victim_body) == ["accepted"], victim_body["results"]
    assert verdicts(attacker_body) != ["accepted"], attacker_body["results"]
    _check_aftermath(executor_client, sandbox_pool, baseline)
    guard.passed = True


def test_oversized_request_is_refused(
    executor_client: TestClient,
    sandbox_pool: SandboxPool,
    baseline: str,
    guard: SimpleNamespace,
) -> None:
    """A20: a body over the cap is a 413 before anything runs, and the service lives on."""
    code = "# " + "x" * (33 << 20) + "\nprint('PWNED')\n"
    response = executor_client.post(
        "/v1/execute", json={"code": code, "tests": [{"stdin": "", "expected_stdout": PWNED}]}
    )
    assert response.status_code == 413, response.text[:500]
    _check_aftermath(executor_client, sandbox_pool, baseline)
    guard.passed = True
