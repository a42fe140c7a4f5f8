"""Admission and memory (issue 48, class 7): what a request holds is counted, what many
skipped tests hold is bounded, and anonymous downloads cannot take every descriptor."""

from __future__ import annotations

import asyncio
import json
import threading
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from fastapi.exceptions import RequestValidationError
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from cobalt.executor import bodies
from cobalt.executor.admission import Admission
from cobalt.executor.bodies import BodyParser
from cobalt.executor.fd_budget import FDS_PER_SLOT, RESERVED_FDS, connection_limit
from cobalt.executor.judge import skipped
from cobalt.executor.presets import with_prior_calls
from cobalt.executor.program_memory import LCB_REPLAY_BYTES, lcb_replay
from cobalt.executor.program_memory import request_bytes as _request_bytes
from cobalt.executor.service import job_for_test
from cobalt.shared.contracts import CallTest, Compare, ExecuteRequest, TestCase
from cobalt.shared.docs import MAX_ASSET_DOWNLOADS, AtMostAtOnce
from cobalt.shared.errors import Overloaded
from tests.executor.helpers import execute, verdicts

values = st.recursive(
    st.one_of(st.integers(), st.text(max_size=50), st.floats(allow_nan=False), st.none()),
    lambda inner: st.lists(inner, max_size=20) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=200,
)


@settings(max_examples=30, deadline=None)
@given(args=st.lists(values, max_size=4), expected=values, repeat=st.integers(1, 300))
def test_call_test_values_count_towards_admission(
    args: list[Any], expected: Any, repeat: int
) -> None:
    """Arguments and expected values are held while a program waits and runs: admission
    counts at least their JSON (before, 3 x 11 MiB of arguments counted 256 bytes a test)."""
    big_args = [json.dumps(args) * repeat]
    test = CallTest(fn_name="f", args=big_args, expected=expected)
    request = ExecuteRequest(code="def f(*a):\n    pass\n", tests=[test])
    held = len(json.dumps([big_args, {}, expected]))
    assert _request_bytes(request) >= held
    admission = Admission(max_tests=100, max_bytes=held, slots=1)

    async def hold() -> None:
        async with admission.admitted(1, _request_bytes(request)):
            with pytest.raises(Overloaded):
                admission.check_room()

    asyncio.run(hold())


def test_skipped_results_share_one_object() -> None:
    """500,000 skipped tests in a batch cost a pointer each, not a result each."""
    first = skipped("Not run: an earlier test failed.")
    assert all(skipped("Not run: an earlier test failed.") is first for _ in range(1000))


def test_asset_downloads_are_bounded() -> None:
    """Downloads held open by slow clients take at most MAX_ASSET_DOWNLOADS files; the
    rest are answered 503 at once, holding nothing."""
    release = asyncio.Event()
    started = 0

    async def slow_asset(scope: Any, receive: Any, send: Any) -> None:
        nonlocal started
        started += 1
        await release.wait()

    bounded = AtMostAtOnce(slow_asset, MAX_ASSET_DOWNLOADS)

    async def main() -> list[int]:
        statuses: list[int] = []

        async def download() -> None:
            async def send(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    statuses.append(message["status"])

            async def receive() -> dict[str, Any]:
                return {"type": "http.request", "body": b"", "more_body": False}

            scope = {"type": "http", "method": "GET", "path": "/x", "headers": []}
            await bounded(scope, receive, send)

        tasks = [asyncio.create_task(download()) for _ in range(50)]
        await asyncio.sleep(0.05)
        refused = list(statuses)
        release.set()
        await asyncio.gather(*tasks)
        return refused

    refused = asyncio.run(main())
    assert started == MAX_ASSET_DOWNLOADS
    assert refused == [503] * (50 - MAX_ASSET_DOWNLOADS)
    assert bounded.running == 0


def test_connections_leave_room_for_the_slots_descriptors() -> None:
    assert connection_limit(2, nofile=512) == 512 - RESERVED_FDS - 2 * FDS_PER_SLOT
    assert connection_limit(64, nofile=512) == 8  # never none at all
    assert connection_limit(4) is None or connection_limit(4) > 0


def test_lcb_replays_count_towards_admission() -> None:
    """Under `lcb` each of the first 256 call tests replays the calls before it, up to
    `LCB_REPLAY_BYTES` of them: admission counts each call's replay text once and each
    test's replay again (what its command holds), and no more than the cap per test."""
    args = ["x" * 100_000]
    tests = [CallTest(fn_name="f", args=args, expected=1) for _ in range(100)]
    plain = ExecuteRequest(code="def f(s):\n    return 1\n", tests=tests)
    lcb = ExecuteRequest(code=plain.code, tests=tests, compare="lcb")
    call = len(json.dumps([args, {}, 1]))
    replayed = sum(i * call for i in range(100) if i * call <= LCB_REPLAY_BYTES)
    assert _request_bytes(lcb) >= _request_bytes(plain) + replayed
    assert _request_bytes(lcb) - _request_bytes(plain) <= 100 * (call + LCB_REPLAY_BYTES)


def _lcb_request(tests: int, arg_bytes: int) -> ExecuteRequest:
    case: list[TestCase] = [
        CallTest(fn_name="f", args=["x" * arg_bytes, i], expected=1) for i in range(tests)
    ]
    return ExecuteRequest(code="def f(s, i):\n    return 1\n", tests=case, compare=Compare.LCB)


@pytest.mark.parametrize("tests", [8, 32, 128])
def test_lcb_replay_serializes_each_call_once(tests: int) -> None:
    """Preparing every test of an `lcb` request serializes each call's arguments once
    (before, test k re-serialized the k calls before it: n^2/2 in all), and no test's
    command carries more than `LCB_REPLAY_BYTES` of replay: the work is linear."""
    request = _lcb_request(tests, 100_000)
    commands = [
        with_prior_calls(b"{}", job_for_test(test, request, 1.0).prior_calls)
        for test in request.tests
    ]
    assert lcb_replay(request).serialized == min(tests - 1, _replayable(100_000))
    assert all(len(command) <= LCB_REPLAY_BYTES + 64 for command in commands)
    # The replay text of all tests together grows linearly with the tests, at most.
    assert sum(map(len, commands)) <= tests * (LCB_REPLAY_BYTES + 64)


def _replayable(call_bytes: int) -> int:
    """How many earlier calls of about `call_bytes` fit in one test's replay."""
    return LCB_REPLAY_BYTES // (call_bytes + 16) + 1


def test_lcb_replay_peak_memory_is_bounded_per_test() -> None:
    """Preparing four times the tests costs about the same peak memory (the largest
    test's replay), not four times it or more (tracemalloc, not a clock)."""

    def peak(tests: int) -> int:
        request = _lcb_request(tests, 200_000)
        replay = lcb_replay(request)
        for test in request.tests:  # the pieces are made once and kept for the request
            replay.calls_before(test)
        tracemalloc.start()
        for test in request.tests:
            with_prior_calls(b"{}", job_for_test(test, request, 1.0).prior_calls)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    assert peak(80) < 1.5 * peak(20) + (1 << 20)


calls = st.lists(
    st.tuples(
        st.lists(values, max_size=3),
        st.dictionaries(st.from_regex(r"[a-z]\w*", fullmatch=True), values, max_size=2),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None)
@given(calls=calls)
def test_the_replayed_calls_reach_the_zygote_as_they_were_sent(
    calls: list[tuple[list[Any], dict[str, Any]]],
) -> None:
    """What the harness decodes as `_PRIOR` is the earlier calls' arguments, in order
    (quotes, backslashes and any text inside them included)."""
    tests = [CallTest(fn_name="f", args=args, kwargs=kwargs, expected=1) for args, kwargs in calls]
    request = ExecuteRequest(
        code="def f(*a, **k):\n    return 1\n", tests=list[TestCase](tests), compare=Compare.LCB
    )
    job = job_for_test(request.tests[-1], request, 1.0)
    command = json.loads(with_prior_calls(b'{"nonce": "n"}', job.prior_calls))
    sent = [[test.args, test.kwargs] for test in tests[:-1]]
    assert json.loads(command.get("prior", "[]")) == json.loads(json.dumps(sent))


def test_an_lcb_test_whose_earlier_calls_are_too_big_starts_fresh() -> None:
    request = _lcb_request(4, (LCB_REPLAY_BYTES * 2) // 5)
    replays = [lcb_replay(request).calls_before(test) for test in request.tests]
    assert [len(calls) for calls in replays] == [0, 1, 2, 0]


def test_a_body_is_never_parsed_behind_bigger_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two big bodies (millions of small values each) keep both big-lane parser
    processes busy; a 1 MiB body beside them is parsed in its own lane and is done first
    (a 1.5 MiB one once waited 20 s behind two 30 MB ones)."""
    monkeypatch.setattr(bodies, "SMALL_LANE_BYTES", 2 << 20)  # smaller bodies, same rule
    parser = BodyParser()
    parser.warm_up()

    def body(ints: int, tests: int) -> bytes:
        # Many small values: slow to decode and validate, as a real argument-heavy body.
        case = {"fn_name": "f", "args": [[1] * (ints // tests)], "expected": 1}
        return json.dumps({"code": "def f(x):\n    return 1\n", "tests": [case] * tests}).encode()

    big = body(2_400_000, 20)  # a big parse takes several times the small one
    small = json.dumps(
        {"code": "print(2)", "tests": [{"stdin": "x" * (1 << 20), "expected_stdout": "2"}]}
    ).encode()
    finished: list[str] = []

    async def parse(name: str, data: bytes) -> None:
        await parser.parse(data, ExecuteRequest)
        finished.append(name)

    async def main() -> None:
        bigs = [asyncio.create_task(parse(f"big{i}", big)) for i in range(2)]
        await asyncio.sleep(0.05)  # both big ones are in their processes
        await asyncio.gather(parse("small", small), *bigs)

    try:
        asyncio.run(main())
    finally:
        parser.close()
    # Order, not time (a ratio of times failed on a busy CI machine): behind them it would
    # start only when a big parse ended, so it could not end before both; in its own lane
    # it ends while both are still parsing.
    assert finished[0] == "small", finished


class _HeldPool(ThreadPoolExecutor):
    """A stand-in for the big lane's parser processes: every body handed to it waits
    until `release` is set, as one behind two 30 MB bodies would."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.release = threading.Event()

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        def held() -> Any:
            self.release.wait()
            return fn(*args, **kwargs)

        return super().submit(held)


def test_a_small_body_is_answered_while_big_refused_ones_are_still_parsing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Order, not time: two big bodies (refused once parsed: a test with no expected
    output) hold the big lane; a 1.5 MiB body is parsed and valid while both are still
    unfinished, and they are then refused with a 422's errors, not a server error."""
    monkeypatch.setattr(bodies, "SMALL_LANE_BYTES", 2 << 20)
    parser = BodyParser()
    held = _HeldPool()
    parser._pools["big"] = held
    refused_case = {"stdin": "x" * (3 << 20)}  # no expected_stdout: refused
    big = json.dumps({"code": "print(1)", "tests": [refused_case]}).encode()
    small_case = {"stdin": "y" * (3 << 19), "expected_stdout": "1"}
    small = json.dumps({"code": "print(1)", "tests": [small_case]}).encode()

    async def main() -> tuple[bool, list[BaseException | ExecuteRequest]]:
        bigs = [asyncio.create_task(parser.parse(big, ExecuteRequest)) for _ in range(2)]
        # A hang guard only: routed behind the big ones, the small body would never end.
        parsed = await asyncio.wait_for(parser.parse(small, ExecuteRequest), 120)
        big_pending = not any(task.done() for task in bigs)
        assert parsed.tests[0].expected_stdout == "1"  # type: ignore[union-attr]
        held.release.set()
        return big_pending, await asyncio.gather(*bigs, return_exceptions=True)

    try:
        big_pending, outcomes = asyncio.run(main())
    finally:
        held.shutdown()
        parser.close()
    assert big_pending
    assert all(isinstance(outcome, RequestValidationError) for outcome in outcomes), outcomes


def test_replayed_calls_reach_the_program_until_they_pass_the_cap(
    executor_client: TestClient,
) -> None:
    """Through the real sandbox: a stateful solution sees each earlier call replayed on
    its instance (as LiveCodeBench's one instance), and a test whose earlier calls pass
    `LCB_REPLAY_BYTES` starts fresh."""
    code = (
        "class Solution:\n    def f(self, s, i):\n"
        "        self.n = getattr(self, 'n', 0) + 1\n        return self.n\n"
    )
    big = "x" * ((LCB_REPLAY_BYTES * 2) // 5)
    tests = [
        {"fn_name": "f", "args": [big, i], "expected": calls}
        for i, calls in enumerate([1, 2, 3, 1])
    ]
    body = execute(executor_client, code, tests, compare="lcb")
    assert verdicts(body) == ["accepted"] * 4, [r["feedback"] for r in body["results"]]
