"""Slots that are clean or retired (issue 31, classes 2 and 5), through HTTP on the real sandbox.

A hostile test may change anything it can reach in its jail's writable mounts (`/tmp`,
`/dev/shm`): files, trees, POSIX ACLs (default ones included), xattrs, modes, owners,
times, fifos, sockets, links, inode flags. The next test on that slot must see exactly
what the first test of a fresh jail sees, and must pass; the reset after a test must not
run on the next test's clock; a slot whose harness fails is restarted at once, and one
that keeps failing is retired (and readiness says so) until a replacement works.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool, shared_uid_pipe_budget
from cobalt.executor.readiness import Readiness, ReadyState
from cobalt.executor.sandbox import SandboxJob
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.contracts import Verdict
from tests.executor.helpers import INTEGRITY_LIMITS, wait_ready
from tests.executor.nonroot import delegated_cgroups, nonroot_executor
from tests.support.serving import serve_executor

QUICK = {"wall_s": 5.0, "memory_mb": 256}

PROBE = r"""
import os, time
def describe(root):
    found = []
    for base, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(dirs + files):
            path = os.path.join(base, name)
            info = os.lstat(path)
            found.append((path, oct(info.st_mode), info.st_ino, info.st_nlink,
                          sorted(os.listxattr(path, follow_symlinks=False))))
    info = os.stat(root)
    usage = os.statvfs(root)
    recent = [abs(time.time() - t) < 120 for t in (info.st_atime, info.st_mtime, info.st_ctime)]
    return [root, oct(info.st_mode), info.st_uid == os.getuid(), info.st_gid == os.getgid(),
            info.st_ino, sorted(os.listxattr(root)), recent, usage.f_bfree, usage.f_ffree, found]
for root in ("/tmp", "/dev/shm"):
    print(describe(root))
print(os.getcwd(), repr(open("/proc/uptime").read()))
with open("probe", "w") as fh:
    fh.write("x" * 100000)
os.mkdir("made")
print(os.stat("probe").st_ino, os.stat("made").st_ino, oct(os.stat("made").st_mode))
r, w = os.pipe()
os.write(w, b"y" * 60000)
print(len(os.read(r, 65536)))
"""
"""Everything of the writable mounts a test can observe, and that normal use still works."""

CORRECT = "print(sum(map(int, input().split())))\n"


def _post(client: httpx.Client, code: str, tests: list[dict[str, Any]], **limits: Any) -> Any:
    response = client.post(
        "/v1/execute", json={"code": code, "tests": tests, "limits": {**QUICK, **limits}}
    )
    assert response.status_code == 200, response.text[:2000]
    return response.json()["results"]


def _probe(client: httpx.Client) -> str:
    (result,) = _post(client, PROBE, [{"stdin": "", "expected_stdout": ""}])
    assert result["verdict"] == "wrong_answer", result  # ran, and printed its description
    stdout: str = result["stdout"]
    return stdout


@pytest.fixture(scope="module", params=["per-slot-uids", "shared-uid"])
def one_slot(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, str]]:
    """An executor with ONE slot (so each test runs where the previous one ran), in each
    uid mode; yields a client and what a fresh jail's probe prints."""
    if request.param == "per-slot-uids":
        limits = {key.lower(): value for key, value in INTEGRITY_LIMITS.items()}
        settings_ = ExecutorSettings(slots=1, **limits)  # type: ignore[arg-type]
        pool = SandboxPool(settings_.sandbox_config())
        pool.start()
        try:
            with (
                serve_executor(settings_, pool) as url,
                httpx.Client(base_url=url, timeout=120) as client,
            ):
                yield client, _fresh_description(client)
        finally:
            pool.close()
        return
    log = tmp_path_factory.mktemp("slots-nonroot") / "server.log"
    env = {f"COBALT_EXECUTOR_{key}": value for key, value in INTEGRITY_LIMITS.items()}
    env["COBALT_EXECUTOR_SLOTS"] = "1"
    with (
        delegated_cgroups(61990) as cgroups,
        nonroot_executor(log, cgroups=cgroups, **env) as url,
        httpx.Client(base_url=url, timeout=120) as client,
    ):
        yield client, _fresh_description(client)


def _fresh_description(client: httpx.Client) -> str:
    wait_ready(client)
    description = _probe(client)
    assert description == _probe(client), "two clean tests in a row must look the same"
    lines = description.splitlines()
    assert "[], [True, True, True]" in lines[0] and lines[0].endswith(
        ", [('/tmp/run', '0o40755', 2, 2, [])]]"
    ), description
    assert lines[2] == "/tmp/run ''", description  # /proc/uptime is masked (host idle time)
    assert lines[-1] == "60000", description
    return description


# --- what a hostile test may do to its jail's writable mounts ----------------------------

ROOTS = ("/tmp", "/dev/shm", "/tmp/run")
PATHS = st.sampled_from([*ROOTS, "/tmp/run/f", "/dev/shm/f", "/tmp/d", "/tmp/run/d/e"])
NAMES = st.text("abcxyz._-", min_size=1, max_size=12)


def _acl(entries: list[tuple[int, int, int]]) -> bytes:
    """A POSIX ACL as the kernel's `system.posix_acl_*` xattrs hold it (version 2)."""
    body = b"".join(
        tag.to_bytes(2, "little") + perm.to_bytes(2, "little") + qual.to_bytes(4, "little")
        for tag, perm, qual in entries
    )
    return (2).to_bytes(4, "little") + body


PERMS = st.integers(0, 7)
ACLS = st.builds(
    lambda user, group, other, extra, mask: _acl(
        [(1, user, 0xFFFFFFFF), *([(2, extra, 0)] if extra is not None else []),
         (4, group, 0xFFFFFFFF), *([(0x10, mask, 0xFFFFFFFF)] if extra is not None else []),
         (0x20, other, 0xFFFFFFFF)]
    ),
    PERMS, PERMS, PERMS, st.none() | PERMS, PERMS,
)  # fmt: skip


def _op(kind: str, *args: Any) -> str:
    return f"    {kind}(*{args!r})\n"


OPS = st.one_of(
    st.tuples(st.just("mkfile"), PATHS, NAMES, st.integers(0, 70000)),
    st.tuples(st.just("nest"), PATHS, st.integers(1, 400)),
    st.tuples(st.just("many"), PATHS, st.integers(1, 3000)),
    st.tuples(st.just("xattr"), PATHS, NAMES, st.binary(max_size=300)),
    st.tuples(st.just("acl"), PATHS, st.sampled_from(["default", "access"]), ACLS),
    st.tuples(st.just("chmod"), PATHS, st.integers(0, 0o7777)),
    st.tuples(st.just("chown"), PATHS, st.sampled_from([0, 65534, -1])),
    st.tuples(st.just("utime"), PATHS, st.integers(-(2**31), 2**33), st.integers(0, 2**33)),
    st.tuples(
        st.just("special"),
        PATHS,
        NAMES,
        st.sampled_from(["fifo", "socket", "symlink", "hardlink", "immutable", "append"]),
    ),  # fmt: skip
    st.tuples(st.just("fill"), st.sampled_from(["/tmp", "/dev/shm"])),
)

HOSTILE_PRELUDE = r"""
import fcntl, os, socket, struct
def _parent(path):
    os.makedirs(path, exist_ok=True) if not os.path.exists(path) else None
    return path
def mkfile(path, name, size):
    with open(os.path.join(_parent(path), name), "wb") as fh:
        fh.write(b"z" * size)
def nest(path, depth):
    fd = os.open(_parent(path), os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("n", dir_fd=fd)
        fd, parent = os.open("n", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd), fd
        os.close(parent)
    return depth
def many(path, count):
    base = _parent(path)
    for i in range(count):
        open(os.path.join(base, "m%d" % i), "w").close()
def xattr(path, name, value):
    os.setxattr(_parent(path), "user." + name, value)
def acl(path, which, value):
    os.setxattr(_parent(path), "system.posix_acl_" + which, value)
def chmod(path, mode):
    os.chmod(_parent(path), mode)
def chown(path, uid):
    os.chown(_parent(path), uid, uid)
def utime(path, atime, mtime):
    os.utime(_parent(path), (atime, mtime))
def special(path, name, kind):
    target = os.path.join(_parent(path), name)
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "socket":
        socket.socket(socket.AF_UNIX).bind(target)
    elif kind == "symlink":
        os.symlink("/", target)
    elif kind == "hardlink":
        open(target, "w").close()
        os.link(target, target + ".2")
    else:
        fd = os.open(_parent(path), os.O_RDONLY)
        flag = 0x10 if kind == "immutable" else 0x20
        fcntl.ioctl(fd, 0x40086602, struct.pack("l", flag))
def fill(root):
    with open(os.path.join(root, "fill"), "wb") as fh:
        while True:
            fh.write(b"f" * (1 << 20))
def hostile():
"""


def _hostile_program(ops: list[tuple[Any, ...]]) -> str:
    body = "".join(
        f"    try:\n    {_op(op[0], *op[1:])}    except (OSError, ValueError):\n        pass\n"
        for op in ops
    )
    return HOSTILE_PRELUDE + (body or "    pass\n") + "hostile()\nprint('done')\n"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=st.lists(OPS, min_size=1, max_size=8))
def test_whatever_a_test_does_to_its_writable_mounts_the_next_test_sees_a_fresh_jail(
    one_slot: tuple[httpx.Client, str], ops: list[tuple[Any, ...]]
) -> None:
    client, fresh = one_slot
    (hostile,) = _post(client, _hostile_program(ops), [{"stdin": "", "expected_stdout": "done"}])
    assert hostile["verdict"] in {"accepted", "runtime_error", "time_limit", "output_limit"}, (
        hostile
    )
    assert _probe(client) == fresh
    assert [
        r["verdict"] for r in _post(client, CORRECT, [{"stdin": "2 3", "expected_stdout": "5"}])
    ] == ["accepted"]


def test_a_default_acl_on_tmp_breaks_no_later_test(one_slot: tuple[httpx.Client, str]) -> None:
    """The finding's own example: a default ACL (and xattrs, times) on /tmp and /dev/shm."""
    client, fresh = one_slot
    code = _hostile_program(
        [
            (
                "acl",
                root,
                "default",
                _acl([(1, 0, 0xFFFFFFFF), (4, 0, 0xFFFFFFFF), (0x20, 0, 0xFFFFFFFF)]),
            )  # fmt: skip
            for root in ROOTS
        ]
        + [("xattr", root, "tenant", b"secret") for root in ROOTS]
        + [("utime", root, 1, 1) for root in ROOTS]
    )
    _post(client, code, [{"stdin": "", "expected_stdout": "done"}])
    results = _post(
        client, CORRECT, [{"stdin": f"{i} 1", "expected_stdout": str(i + 1)} for i in range(20)]
    )
    assert [r["verdict"] for r in results] == ["accepted"] * 20
    assert _probe(client) == fresh


def test_a_huge_tree_left_behind_is_not_cleaned_on_the_next_tests_clock(
    one_slot: tuple[httpx.Client, str],
) -> None:
    """15,000 nested folders and 30,000 files: the next caller's 20 ms program is judged
    under a tight wall limit, and accepted (the reset ran before its clock started)."""
    client, fresh = one_slot
    (hostile,) = _post(
        client,
        _hostile_program([("nest", "/tmp/run", 15000), ("many", "/dev/shm", 30000)]),
        [{"stdin": "", "expected_stdout": "done"}],
        wall_s=30.0,
    )
    assert hostile["verdict"] == "accepted", hostile
    (result,) = _post(client, CORRECT, [{"stdin": "20 22", "expected_stdout": "42"}], wall_s=0.5)
    assert result["verdict"] == "accepted", result
    assert _probe(client) == fresh


# --- slots that fail are restarted at once, and retired if they keep failing ------------


@pytest.fixture
def private_pool() -> Iterator[tuple[SandboxPool, TestClient]]:
    """A one-slot root pool of its own (these tests break its jails on purpose)."""
    limits = {key.lower(): value for key, value in INTEGRITY_LIMITS.items()}
    settings_ = ExecutorSettings(slots=1, **limits)  # type: ignore[arg-type]
    pool = SandboxPool(settings_.sandbox_config())
    pool.start()
    try:
        with TestClient(create_app(settings_, pool=pool)) as client:
            yield pool, client
    finally:
        pool.close()


def _verdicts(client: TestClient, count: int = 1) -> list[str]:
    tests = [{"stdin": "20 22", "expected_stdout": "42"}] * count
    response = client.post("/v1/execute", json={"code": CORRECT, "tests": tests, "limits": QUICK})
    assert response.status_code == 200, response.text
    return [r["verdict"] for r in response.json()["results"]]


def test_a_jail_that_died_while_idle_is_replaced_before_the_next_test(
    private_pool: tuple[SandboxPool, TestClient],
) -> None:
    pool, client = private_pool
    (slot,) = pool.slots
    assert slot.pid is not None
    os.killpg(slot.pid, signal.SIGKILL)
    restarts = pool.restarts
    assert _verdicts(client, 3) == ["accepted"] * 3
    assert pool.restarts == restarts + 1


def test_a_reset_that_overruns_its_bound_replaces_the_jail_and_no_verdict_suffers() -> None:
    """A tree that takes the kernel far longer than 50 ms to free: the slot's jail is
    replaced instead of waited for, and the next test is judged on a fresh one."""
    config = dataclasses.replace(ExecutorSettings(slots=1).sandbox_config(), reset_timeout_s=0.05)
    pool = SandboxPool(config)
    pool.start()
    try:
        tree = _hostile_program([("nest", "/tmp/run", 15000), ("many", "/dev/shm", 30000)])
        hostile = pool.run(SandboxJob(code=tree, mode="stdin", wall_s=60.0, cpu_s=60.0))
        assert (hostile.exit_code, hostile.stdout) == (0, b"done\n")
        restarts = pool.restarts
        correct = pool.run(SandboxJob(code=CORRECT, mode="stdin", stdin=b"1 2"))
        assert (correct.started, correct.exit_code, correct.stdout) == (True, 0, b"3\n")
        assert pool.restarts == restarts + 1
    finally:
        pool.close()


def test_a_slot_whose_harness_keeps_failing_is_retired_and_readiness_says_so_until_replaced(
    private_pool: tuple[SandboxPool, TestClient],
) -> None:
    pool, client = private_pool
    (slot,) = pool.slots
    good_filter = slot._test_filter
    # An invalid per-test seccomp program: every test process fails in its harness, before
    # any untrusted code, on every fresh jail too (a broken slot, not a broken program).
    slot._test_filter = b"\0" * 8
    slot.close()
    restarts = pool.restarts
    assert _verdicts(client) == ["sandbox_error"]
    assert pool.restarts >= restarts + 2  # restarted at once and retried there
    while len(pool.retired) == 0:
        assert _verdicts(client) == ["sandbox_error"]
    assert pool.retired == {0} and pool.slots_working() == (0, 1)
    ready = client.get("/readyz")
    assert ready.status_code == 503 and "0 of 1" in ready.text, ready.text
    slot._test_filter = good_filter  # the cause goes away: a replacement jail works again
    deadline = time.monotonic() + 60
    while pool.retired:
        assert time.monotonic() < deadline, "the retired slot was never replaced"
        time.sleep(0.1)
    wait_ready(client, timeout_s=30)
    assert _verdicts(client, 3) == ["accepted"] * 3


@pytest.mark.parametrize(
    ("working", "state"),
    [((4, 4), ReadyState.READY), ((2, 4), ReadyState.READY), ((1, 4), ReadyState.BROKEN),
     ((1, 1), ReadyState.READY), ((0, 1), ReadyState.BROKEN)],
)  # fmt: skip
def test_readiness_needs_half_the_slots_working(
    working: tuple[int, int], state: ReadyState
) -> None:
    readiness = Readiness(
        interval_s=10, timeout_s=10, busy=lambda: False, slots_working=lambda: working
    )
    readiness.observe(Verdict.ACCEPTED)
    assert readiness.state()[0] is state
    if state is ReadyState.BROKEN:
        assert f"{working[0]} of {working[1]}" in readiness.state()[1]


# --- neighbours: one slot's test cannot change what another's pipes hold ----------------

PIPE_HOG = r"""
import fcntl, os, time
held = []
for size in (1 << 20, 65536):
    for _ in range(4000):
        try:
            r, w = os.pipe()
        except OSError:
            break
        try:
            fcntl.fcntl(w, 1031, size)  # F_SETPIPE_SZ
        except OSError:
            pass
        os.close(r)
        held.append(w)
        if len(held) >= 240:
            break
for _ in range(40):
    if os.fork() == 0:
        held = []
        for _ in range(240):
            try:
                r, w = os.pipe()
            except OSError:
                break
            os.close(r)
            held.append(w)
        time.sleep(4)
        os._exit(0)
time.sleep(4)
print("held")
"""

PIPE_NEIGHBOUR = r"""
import time
time.sleep(1.0)
import os
r, w = os.pipe()
os.write(w, b"n" * 60000)  # fits a default pipe (64 KiB); blocks forever in an 8 KiB one
print(len(os.read(r, 65536)))
"""


def test_a_test_holding_many_pipes_does_not_shrink_a_neighbours_pipes(
    executor_http: httpx.Client,
) -> None:
    body = {
        "requests": [
            {"code": PIPE_HOG, "tests": [{"stdin": "", "expected_stdout": "held"}],
             "limits": {"wall_s": 8.0, "memory_mb": 512}},
            {"code": PIPE_NEIGHBOUR, "tests": [{"stdin": "", "expected_stdout": "60000"}],
             "limits": {"wall_s": 4.0, "memory_mb": 128}},
        ]
    }  # fmt: skip
    response = executor_http.post("/v1/execute/batch", json=body)
    assert response.status_code == 200, response.text[:2000]
    hog, neighbour = (r["results"][0] for r in response.json()["results"])
    assert neighbour["verdict"] == "accepted", (neighbour, hog["verdict"])


PIPE_COUNT = r"""
import fcntl, os
r, w = os.pipe()
try:
    fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ
    print("grown")
except OSError as exc:
    print("not grown:", os.strerror(exc.errno))
made = 1
try:
    for _ in range(2999):
        r, w = os.pipe()
        os.close(r)
        os.close(w)
        made += 1
except OSError as exc:
    print("stopped:", os.strerror(exc.errno))
print(made)
"""


def test_in_the_shared_uid_mode_a_test_creates_at_most_its_share_of_the_pipe_quota(
    executor_http: httpx.Client, request: pytest.FixtureRequest
) -> None:
    shared = "shared-uid" in request.node.callspec.id
    body = {"code": PIPE_COUNT, "tests": [{"stdin": "", "expected_stdout": ""}] * 2}
    response = executor_http.post("/v1/execute", json=body)
    assert response.status_code == 200, response.text[:2000]
    for result in response.json()["results"]:  # each test has its own budget
        lines = result["stdout"].splitlines()
        if shared:
            budget = shared_uid_pipe_budget(2, shared_uid=True)
            assert 16 <= budget < 3000
            assert lines == ["not grown: Operation not permitted",
                             "stopped: Too many open files", str(budget)], result  # fmt: skip
        else:
            assert lines == ["grown", "3000"], result
