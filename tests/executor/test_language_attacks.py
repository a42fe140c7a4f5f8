"""Each runtime attacked in its own idioms (issue 47): a C++, Java, JavaScript (Node), Go
or Rust program cannot forge its verdict, break its slot for the next test, outlive its
test, reach what it must not, or take more than its limits.

test_languages.py attacks the shared exec path with one hostile C program. Here each
runtime brings its own ways in, with threads, signal handling, process APIs, file APIs and
foreign calls of its own: the JVM's shutdown hooks, `ProcessBuilder`, `sun.misc.Signal`
and `Unsafe`; Node's detached `child_process.spawn` with `unref`, `fork`, `exit` handlers
and `worker_threads`; Go's `os.StartProcess` and `syscall.ForkExec` with `Setsid` or
`Setpgid`, `signal.Ignore` and goroutines blocked in system calls; Rust's `Command` with
`std::mem::forget` and the C library's `fork`, `setsid` and `mmap` declared by hand.

One program per language (attacks/hostile/) reads its attack from the first line of its
stdin, so each compiles once per session (the server's build cache keeps it). After every
attack the jails must read exactly as fresh ones (attacks/jail_probe.py, in both slots),
no process of the sandbox uids may live on the host outside the live jails, and nothing
may have reached a host socket or landed on the host (tests/support/jails.py). A test
here that fails is a weakness of the sandbox, not of the test: do not weaken it.
"""

from __future__ import annotations

import re
import signal
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobalt.executor.compare import outputs_match
from cobalt.executor.languages import LANGUAGES, available_languages
from cobalt.executor.pool import SandboxPool
from cobalt.shared.contracts import Compare
from tests.executor.helpers import execute, verdicts
from tests.support.attacks import ATTACKS, PWNED, TOKEN
from tests.support.jails import assert_nothing_reached, check_aftermath

_SOURCES = {language.name: language.source for language in LANGUAGES}
HOSTILE = {
    name: (ATTACKS / "hostile" / _SOURCES[name]).read_text()
    for name in ("cpp", "java", "nodejs", "go", "rust")
}
"""The hostile program of each language, by the executor's name for it."""

OFFERED = {toolchain.language.name for toolchain in available_languages()}

LIMITS = {"wall_s": 5.0, "memory_mb": 256}
"""Room for a runtime that starts copies of itself (a JVM starting JVMs)."""
BOMB_LIMITS = {"wall_s": 5.0, "memory_mb": 128}
"""A runtime thrashing its collector near its heap limit takes seconds to give up."""
LINGER_S = 20
"""How long each hostile program's daemons leave marks, if nothing ends them."""

NOT_THE_PROGRAMS = ("accepted", "sandbox_error")
"""Verdicts an attack must never get: its own success, or the executor's blame."""


@pytest.fixture(params=sorted(HOSTILE))
def language(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name not in OFFERED:
        pytest.skip(f"{name}'s toolchain is not installed")
    return name


def _attack(
    client: TestClient, language: str, tests: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """Run the language's hostile program on `tests`; it must have compiled."""
    extra.setdefault("limits", LIMITS)
    body = execute(
        client, HOSTILE[language], tests, language=language, stream_chars=1 << 16, **extra
    )
    compilation = body["compilation"]
    assert compilation is None or compilation["status"] == "ok", compilation
    return body


def _mode(line: str, expected: str = PWNED) -> dict[str, str]:
    return {"stdin": line + "\n", "expected_stdout": expected}


def _summary(result: dict[str, Any]) -> str:
    return (
        f"{result['verdict']} exit={result['exit_code']} signal={result['signal']} "
        f"wall_ms={result['wall_ms']} stdout={result['stdout'][:300]!r} "
        f"stderr={result['stderr'][-600:]!r} feedback={result['feedback'][:300]!r}"
    )


@pytest.fixture
def jails(
    executor_client: TestClient, sandbox_pool: SandboxPool, baseline: str, guard: SimpleNamespace
) -> SimpleNamespace:
    """The in-process executor on the shared pool, a fresh jail's probe output, and the
    guard that restarts the jails after an attack that did not pass (conftest.py)."""
    return SimpleNamespace(
        client=executor_client, pool=sandbox_pool, baseline=baseline, guard=guard
    )


def _passed(jails: SimpleNamespace, host_paths: tuple[str, ...] = ()) -> None:
    """Both jails read as fresh ones and nothing leaked to the host: the attack failed."""
    check_aftermath(jails.client, jails.pool, jails.baseline, host_paths)
    jails.guard.passed = True


# --- forge a verdict --------------------------------------------------------------------


def test_a_program_cannot_forge_its_verdict_or_stop_the_jails_init(
    language: str, jails: SimpleNamespace
) -> None:
    """Fake records on every descriptor it has or can reopen (its own fds 3-63 and
    /proc/self/fd, the init's /proc/1/fd), result files in the working directory, /tmp
    and /dev/shm, a fake record on stdout and stderr, and SIGTERM, SIGSTOP and SIGKILL to
    every process it sees (the jail's init too): its own verdict stays its output's, and
    the test after it, in the same jails, is judged as usual."""
    inits = jails.pool.live_pids()
    forge, honest = _mode("forge"), _mode("echo exit 0", PWNED)
    honest["stdin"] += PWNED + "\n"
    body = _attack(jails.client, language, [forge, honest, forge, honest])
    for result in body["results"][::2]:
        assert result["verdict"] not in NOT_THE_PROGRAMS, _summary(result)
    for result in body["results"][1::2]:
        assert result["verdict"] == "accepted", _summary(result)
    assert jails.pool.live_pids() == inits, "a jail's init died: the jail was replaced"
    _passed(jails)


_PRINTED = st.lists(st.sampled_from([*'ab 01{}"\u00e9\x00\n', TOKEN]), max_size=12).map("".join)
_ENDINGS = st.one_of(
    st.just(("exit", 0)),
    st.tuples(st.just("exit"), st.integers(1, 255)),
    st.tuples(
        st.just("signal"),
        st.sampled_from(
            [
                signal.SIGABRT,
                signal.SIGBUS,
                signal.SIGKILL,
                signal.SIGUSR1,
                signal.SIGSEGV,
                signal.SIGTERM,
                signal.SIGXCPU,
                signal.SIGSYS,
            ]
        ).map(int),
    ),
)
_RECORD = f'{TOKEN} {{"status": "done"}}\n'


def test_whatever_a_program_prints_and_however_it_ends_only_a_match_is_accepted(
    language: str, executor_client: TestClient
) -> None:
    """Any output (fake records and NULs included), then any exit status or signal raised
    on itself, through the runtime's own exit and signal APIs (`System.exit` and
    `sun.misc.Signal.raise`, `process.exit` and `process.kill`, `os.Exit` and
    `syscall.Kill`, `std::process::exit` and `kill`): accepted exactly when it exited 0
    and its output matches; a non-zero exit is a runtime error, a signal never the
    executor's fault."""

    @settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
    @given(
        cases=st.lists(
            st.tuples(_PRINTED, st.one_of(st.none(), _PRINTED), st.booleans(), _ENDINGS),
            min_size=1,
            max_size=4,
        )
    )
    def only_a_match_is_accepted(
        cases: list[tuple[str, str | None, bool, tuple[str, int]]],
    ) -> None:
        tests = []
        for printed, expected, forged, (how, number) in cases:
            text = (_RECORD if forged else "") + printed
            tests.append(
                {
                    "stdin": f"echo {how} {number}\n{text}",
                    "expected_stdout": text if expected is None else expected,
                }
            )
        body = _attack(executor_client, language, tests)
        for test, result, (_, _, _, ending) in zip(tests, body["results"], cases, strict=True):
            printed = test["stdin"].split("\n", 1)[1]
            if ending == ("exit", 0):
                match = outputs_match(printed, test["expected_stdout"], Compare.COBALT)
                want = "accepted" if match else "wrong_answer"
                assert result["verdict"] == want, (test, _summary(result))
            elif ending[0] == "exit":
                assert result["verdict"] == "runtime_error", (test, _summary(result))
            else:
                assert result["verdict"] not in NOT_THE_PROGRAMS, (test, _summary(result))

    only_a_match_is_accepted()


# --- outlive its test, break its slot ---------------------------------------------------


def test_a_daemon_ends_with_its_test_and_leaves_nothing_behind(
    language: str, jails: SimpleNamespace
) -> None:
    """Every way the runtime has to leave something running (detached children that
    ignore SIGTERM and SIGHUP, setsid, double forks, shutdown hooks and exit handlers that
    start more), each leaving marker files in /tmp, /dev/shm and the working directory
    for 20 s: the test ends when its program does, and the next test in either slot sees
    a fresh jail (no marker, no process), with no process of the jail left on the host."""
    body = _attack(jails.client, language, [_mode("daemon"), _mode("daemon")])
    for result in body["results"]:
        assert result["verdict"] == "accepted", _summary(result)
        # Judged when the program ended, not when its daemons would have.
        assert result["wall_ms"] < LIMITS["wall_s"] * 1000 < LINGER_S * 1000, _summary(result)
    _passed(jails)


_SLOT_ATTACKS = {
    "daemon": "daemon",
    "forge": "forge",
    "fill": "fill",  # /tmp, /dev/shm and the working directory full, then chmod 0
    "escape": "escape /nonexistent 1 1 /nonexistent cobalt-nothing",  # and chmod 0
    "threads": "threads",
    "heap": "heap",
    "native": "native",
    "fork": "fork",
}
"""Everything a program of each language can leave in its slot, by the line that asks for it."""


def test_whatever_programs_do_their_slots_are_fresh_for_the_next_test(
    language: str, jails: SimpleNamespace
) -> None:
    """Any mix of the attacks in one request, spread over both slots (a daemon beside a
    fork bomb, a full /tmp after a flood of fake records): no verdict is forged, and
    nothing of them (a process, a file, a mode, used space) is in either jail after."""

    @settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
    @given(attacks=st.lists(st.sampled_from(sorted(_SLOT_ATTACKS)), min_size=1, max_size=3))
    def leaves_nothing(attacks: list[str]) -> None:
        tests = [_mode(_SLOT_ATTACKS[name]) for name in attacks]
        body = _attack(jails.client, language, tests)
        for name, result in zip(attacks, body["results"], strict=True):
            # Only a daemon's own test prints PWNED: what it leaves is the question.
            if name == "daemon":
                assert result["verdict"] == "accepted", (name, _summary(result))
            else:
                assert result["verdict"] not in NOT_THE_PROGRAMS, (name, _summary(result))
        check_aftermath(jails.client, jails.pool, jails.baseline)

    leaves_nothing()
    _passed(jails)


# --- escape -----------------------------------------------------------------------------


def test_a_program_reaches_nothing_outside_its_jail(
    language: str, jails: SimpleNamespace, listeners: SimpleNamespace, tmp_path: Any
) -> None:
    """Through the runtime's file and network APIs (java.net.Socket, DatagramSocket,
    UnixDomainSocketAddress and URL; Node's net.connect, dgram, http and dns; Go's
    net.Dial, LookupHost and raw syscall.Socket; Rust's TcpStream, UdpSocket, UnixStream
    and an abstract socket by hand): a secret file on the host (by its path, through
    /proc/1/root and /proc/self/root), /etc/shadow, the init's environment, writes to the
    read-only tree and the host, and TCP, UDP, path and abstract UNIX sockets listening
    on the host all fail; and what a test in the other slot plants in its /tmp, /dev/shm
    and working directory, at the same time, is nowhere to be found."""
    secret = f"cobalt-secret-{TOKEN}-{language}"
    secret_file = tmp_path / "secret"
    secret_file.write_text(secret)
    planted = f"cobalt-planted-{TOKEN}-{language}"
    escape = _mode(
        f"escape {secret_file} {listeners.tcp_port} {listeners.udp_port} "
        f"{listeners.unix_path} {listeners.abstract_name}"
    )
    tests = [_mode(f"plant {planted}", "planted"), _mode("seek", planted), escape]
    body = _attack(jails.client, language, tests)
    plant, seek, escaped = body["results"]
    assert plant["verdict"] == "accepted", _summary(plant)
    assert seek["verdict"] == "wrong_answer", _summary(seek)
    assert planted not in seek["stdout"] + seek["stderr"], _summary(seek)
    assert escaped["verdict"] == "wrong_answer", _summary(escaped)
    assert escaped["stdout"].strip() == "held", _summary(escaped)
    for result in body["results"]:
        assert secret not in result["stdout"] + result["stderr"], _summary(result)
    assert_nothing_reached(listeners)
    _passed(jails, host_paths=(f"{secret_file}-written",))


# --- resource exhaustion ----------------------------------------------------------------

_MEMORY_BOMBS = ("heap", "native")
"""The runtime's managed heap (JVM, V8, Go, Rust's Vec) and memory outside it (Unsafe,
Buffer, mmap): both are the test's memory, judged memory_limit."""
_PROCESS_BOMBS = ("threads", "fork")
"""Threads that each hold memory (Java's new Thread, Node's Worker, goroutines that
allocate or block in system calls, Rust's thread::spawn) and copies of the program:
whichever limit comes first ends them."""
_OWN_LIMITS = ("memory_limit", "time_limit", "runtime_error", "output_limit")


def test_resource_bombs_end_at_their_limits_beside_a_judged_neighbour(
    language: str, jails: SimpleNamespace
) -> None:
    """Each bomb ends at a limit of its own, within its wall time, while a correct
    program of the same language in a concurrent request is accepted."""
    bombs = {
        "code": HOSTILE[language],
        "language": language,
        "tests": [_mode(name) for name in (*_MEMORY_BOMBS, *_PROCESS_BOMBS)],
        "limits": BOMB_LIMITS,
    }
    answer = _mode("echo exit 0", "42")
    answer["stdin"] += "42\n"
    neighbour = {"code": HOSTILE[language], "language": language, "tests": [answer] * 2}
    response = jails.client.post("/v1/execute/batch", json={"requests": [bombs, neighbour]})
    assert response.status_code == 200, response.text
    bombed, judged = response.json()["results"]
    assert verdicts(judged) == ["accepted", "accepted"], judged["results"]
    names = (*_MEMORY_BOMBS, *_PROCESS_BOMBS)
    for name, result in zip(names, bombed["results"], strict=True):
        if name in _MEMORY_BOMBS:
            assert result["verdict"] == "memory_limit", (name, _summary(result))
        else:
            # Go's runtime, out of threads, prints every goroutine's stack: output_limit.
            assert result["verdict"] in _OWN_LIMITS, (name, _summary(result))
        assert result["wall_ms"] < (BOMB_LIMITS["wall_s"] + 2) * 1000, (name, _summary(result))
    _passed(jails)


# --- the jail's init at the slot's memory limit ------------------------------------------

OOM_LIMITS = {"wall_s": 4.0, "memory_mb": 64}


def _restarts(client: httpx.Client) -> float:
    found = re.search(
        r"^cobalt_executor_sandbox_restarts (\S+)$", client.get("/metrics").text, re.M
    )
    assert found, "the executor's /metrics has no sandbox restart count"
    return float(found.group(1))


def test_a_program_that_lowers_its_oom_score_cannot_have_its_jails_init_killed(
    executor_http: httpx.Client,
) -> None:
    """An exec'd program may write its own `oom_score_adj` back down to the jail init's
    (0), then hold memory in the kernel (socket buffers, in no process's size) from 16
    small processes until the slot's cgroup is full. The kernel killed the init, the
    biggest process left at that score, and the jail with it; now each test's processes
    have a memory cgroup of their own inside the slot's, and only they are killed: the
    verdict is `memory_limit` and both jails serve on, in both uid modes (cgroup v1)."""
    if "cpp" not in OFFERED:
        pytest.skip("cpp's toolchain is not installed")
    sandbox = executor_http.get("/v1/info").json()["sandbox"]
    if not sandbox.endswith("+cgroup-v1"):
        pytest.skip(f"needs slot cgroups v1 ({sandbox}; v2: docs/executor.md, 'Known limits')")
    answer = _mode("echo exit 0", "1")
    answer["stdin"] += "1\n"
    request = {"code": HOSTILE["cpp"], "language": "cpp", "stream_chars": 1 << 16}
    warm = executor_http.post("/v1/execute", json={**request, "tests": [answer] * 2})
    assert verdicts(warm.json()) == ["accepted"] * 2, warm.text
    restarts = _restarts(executor_http)
    attack = {"tests": [_mode("oom")] * 2, "limits": OOM_LIMITS}
    body = executor_http.post("/v1/execute", json={**request, **attack}).json()
    for result in body["results"]:
        assert result["verdict"] == "memory_limit", _summary(result)
    after = executor_http.post("/v1/execute", json={**request, "tests": [answer] * 2})
    assert verdicts(after.json()) == ["accepted"] * 2, after.text
    assert _restarts(executor_http) == restarts, "a jail's init was OOM-killed: it was replaced"
