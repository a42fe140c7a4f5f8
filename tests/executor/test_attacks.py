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
import time
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cobalt.executor.pool import SandboxPool
from tests.executor.helpers import execute, verdicts
from tests.support.attacks import (
    CASES,
    PERSISTENCE,
    PWNED,
    QUICK,
    TOKEN,
    Case,
    fill_program,
)
from tests.support.jails import assert_nothing_reached, check_aftermath, recycle_jails

# The fixtures `baseline` (a fresh jail's probe output), `listeners` (host sockets) and
# `guard` (fresh jails after a failed case) are in conftest.py, shared with
# test_language_attacks.py.


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
    assert_nothing_reached(listeners)
    check_aftermath(executor_client, sandbox_pool, baseline, case.host_paths)
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
    check_aftermath(executor_client, sandbox_pool, baseline)
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
    recycle_jails(sandbox_pool)  # jails started from now on inherit nothing of this env
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
    check_aftermath(executor_client, sandbox_pool, baseline)
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
    check_aftermath(executor_client, sandbox_pool, baseline)
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
    check_aftermath(executor_client, sandbox_pool, baseline)
    guard.passed = True
