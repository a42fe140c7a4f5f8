"""Slots are isolated from each other: per-slot cgroups, and no activity side channels.

Through HTTP against the real sandbox in both uid modes (issue 18, classes 3 and 6): a
program that hogs processes or kernel memory in one slot gets its own verdict while a
correct program running at the same moment in the other slot is still accepted; and a
program cannot read what earlier tests or other slots did from `/proc`.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from cobalt.executor.cgroups import open_slot_cgroups
from tests.executor.nonroot import NONROOT_UID, delegated_cgroups, nonroot_executor
from tests.support.attacks import ACTIVITY_PROBE, KERNEL_MEMORY_HOG, PROCESS_HOG

NEIGHBOUR = """
import os, time
time.sleep(1.5)
children = []
for _ in range(12):
    pid = os.fork()
    if pid == 0:
        time.sleep(0.2)
        os._exit(0)
    children.append(pid)
block = bytearray(48 << 20)
for pid in children:
    os.waitpid(pid, 0)
print(42)
"""
"""A correct program that needs what a neighbour's hog would take: a dozen processes at
once and 48 MiB, after the hog has had 1.5 s to grab everything it can."""


def _batch(client: httpx.Client, *programs: dict[str, Any]) -> list[dict[str, Any]]:
    response = client.post("/v1/execute/batch", json={"requests": list(programs)})
    assert response.status_code == 200, response.text[:2000]
    return [body["results"][0] for body in response.json()["results"]]


def _neighbours(client: httpx.Client, hog: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run `hog` and NEIGHBOUR at the same time, one per slot."""
    limits = {"wall_s": 6.0, "memory_mb": 128}
    hog_result, neighbour_result = _batch(
        client,
        {"code": hog, "tests": [{"stdin": "", "expected_stdout": "-"}], "limits": limits},
        {"code": NEIGHBOUR, "tests": [{"stdin": "", "expected_stdout": "42"}], "limits": limits},
    )
    return hog_result, neighbour_result


def _cgroups(client: httpx.Client) -> str:
    sandbox: str = client.get("/v1/info").json()["sandbox"]
    return sandbox.rsplit("+", 1)[1]


def _require_cgroups(client: httpx.Client) -> None:
    if _cgroups(client) == "no-cgroups":
        pytest.skip("this host offers no cgroups to the server (see the fallback tests)")


def test_a_process_hog_does_not_starve_the_neighbouring_slot(executor_http: httpx.Client) -> None:
    _require_cgroups(executor_http)
    hog, neighbour = _neighbours(executor_http, PROCESS_HOG)
    assert neighbour["verdict"] == "accepted", neighbour
    assert hog["verdict"] not in ("accepted", "sandbox_error"), hog


def test_kernel_memory_is_charged_to_the_test(executor_http: httpx.Client) -> None:
    """Socket buffers are kernel memory, outside RLIMIT_AS and the zygote's polls: only the
    slot's cgroup sees them. The hog is the one killed, as `memory_limit`."""
    _require_cgroups(executor_http)
    hog, neighbour = _neighbours(executor_http, KERNEL_MEMORY_HOG)
    assert neighbour["verdict"] == "accepted", neighbour
    assert hog["verdict"] == "memory_limit", hog


def test_the_jail_shows_no_activity_of_earlier_tests_or_the_host(
    executor_http: httpx.Client,
) -> None:
    """What pid 1 (the zygote) reaped, the namespace's last pid, and the host's load and
    counters would tell a test what ran before it, in its slot or elsewhere."""
    busy = "import os\nfor _ in range(200):\n    pid = os.fork()\n    if pid == 0:\n" + (
        "        sum(range(20000))\n        os._exit(0)\n    os.waitpid(pid, 0)\nprint('busy')\n"
    )
    before = _probe(executor_http)
    _batch(
        executor_http,
        *[{"code": busy, "tests": [{"stdin": "", "expected_stdout": "busy"}]} for _ in range(4)],
    )
    after = _probe(executor_http)
    assert before["visible"] == after["visible"] == {}, (before, after)


PID_PROBE = """
import json, os
def read(path):
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None
seen = {
    "pid": os.getpid(),
    "stat_pid": int(read("/proc/self/stat").split()[0]),
    "ns_last_pid": read("/proc/sys/kernel/ns_last_pid"),
    "capabilities": [line.split()[1] for line in read("/proc/self/status").splitlines()
                     if line.startswith(("CapEff", "CapPrm"))],
    "max_user_namespaces": read("/proc/sys/user/max_user_namespaces"),
}
child = os.fork()
if child == 0:
    os._exit(0)
os.waitpid(child, 0)
seen["child_pid"] = child
print(json.dumps(seen, sort_keys=True))
"""
"""What a test can learn from pids: its own, its child's, the namespace's counter."""

FRESH_JAIL = {
    "pid": 2,
    "stat_pid": 2,
    "ns_last_pid": "2",
    "child_pid": 3,
    "capabilities": ["0000000000000000", "0000000000000000"],
    "max_user_namespaces": "0",
}
"""What PID_PROBE sees as the first test of a fresh jail: the zygote is pid 1 and the
test pid 2; no capabilities, and no user namespace can be created."""

FORKER = (
    "import os\nfor _ in range(40):\n    pid = os.fork()\n    if pid == 0:\n"
    "        os._exit(0)\n    os.waitpid(pid, 0)\nif os.fork() == 0:\n"
    "    os.setpgrp()\n    os.fork()\n    import time; time.sleep(30)\nprint('forked')\n"
)
"""Starts 42 processes: 40 that exit, and a daemon (double-forked) the zygote must kill."""


def test_a_tests_pids_do_not_tell_what_ran_before_it(executor_http: httpx.Client) -> None:
    """The jail's PID namespace hands out pids in order; the zygote resets its counter before
    each test, so a test on a slot where others forked sees the pids a fresh jail gives."""
    probe = {"code": PID_PROBE, "tests": [{"stdin": "", "expected_stdout": "-"}]}
    forker = {"code": FORKER, "tests": [{"stdin": "", "expected_stdout": "forked"}] * 2}
    slots = executor_http.get("/v1/info").json()["slots"]
    before = _batch(executor_http, *[probe] * slots)
    forked = _batch(executor_http, *[forker] * slots)
    assert {result["verdict"] for result in forked} == {"accepted"}, forked
    after = _batch(executor_http, *[probe] * (2 * slots))
    for result in before + after:
        assert json.loads(result["stdout"]) == FRESH_JAIL, result


def _probe(client: httpx.Client) -> dict[str, Any]:
    response = client.post(
        "/v1/execute",
        json={"code": ACTIVITY_PROBE, "tests": [{"stdin": "", "expected_stdout": "{}"}]},
    )
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    assert result["exit_code"] == 0, result
    probed: dict[str, Any] = {"visible": json.loads(result["stdout"])}
    return probed


# --- without cgroups ---------------------------------------------------------------------


def test_without_delegated_cgroups_the_server_runs_on_its_fallback(tmp_path: Path) -> None:
    """A non-root server with no cgroup subtree of its own (CGROUPS=auto) says so and judges
    as before: rlimits and the zygote's polls."""
    with nonroot_executor(tmp_path / "server.log") as url, httpx.Client(base_url=url) as client:
        assert _cgroups(client) == "no-cgroups"
        response = client.post(
            "/v1/execute",
            json={"code": "print(42)", "tests": [{"stdin": "", "expected_stdout": "42"}]},
        )
        assert [r["verdict"] for r in response.json()["results"]] == ["accepted"]
    assert "no per-slot cgroups" in (tmp_path / "server.log").read_text()


def test_required_cgroups_that_are_not_delegated_refuse_start_up(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as refused:
        with nonroot_executor(tmp_path / "server.log", COBALT_EXECUTOR_CGROUPS="required"):
            pass
    assert "COBALT_EXECUTOR_CGROUPS=required" in str(refused.value)


def test_a_delegated_subtree_is_used_and_cleaned_up(tmp_path: Path) -> None:
    with delegated_cgroups(NONROOT_UID) as dirs:
        if not dirs:
            pytest.skip("no cgroup v1 hierarchies to delegate on this host")
        with nonroot_executor(tmp_path / "server.log", cgroups=dirs) as url:
            with httpx.Client(base_url=url) as client:
                assert _cgroups(client) == "cgroup-v1"
            slots = sorted(path.name for path in dirs[0].glob("cobalt-executor-*/slot*"))
            assert slots == ["slot0", "slot1"]
        # The server removed its cgroups when it stopped.
        assert not list(dirs[0].glob("cobalt-executor-*")), subprocess.run(
            ["ls", "-R", str(dirs[0])], capture_output=True, text=True, check=False
        ).stdout


def test_cgroups_left_by_a_dead_executor_are_swept_at_start() -> None:
    """An executor killed with SIGKILL cannot remove its cgroups; the next one does."""
    cgroups = open_slot_cgroups("auto", 1, 8)
    try:
        if cgroups.version != 1:
            pytest.skip(f"needs cgroup v1 as root here ({cgroups.reason or cgroups.describe()})")
        pids_parent = cgroups.parents[1].parent
    finally:
        cgroups.close()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = pids_parent / f"cobalt-executor-{dead.pid}-0"
    (stale / "slot0").mkdir(parents=True)
    live = open_slot_cgroups("required", 1, 8)
    try:
        assert not stale.exists()
        assert all(slot.pids.is_dir() for slot in live.slots)
    finally:
        live.close()
    assert not any(parent.exists() for parent in live.parents)
