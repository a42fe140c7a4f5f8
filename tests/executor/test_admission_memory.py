"""Admission and memory (issue 48, class 7): what a request holds is counted, what many
skipped tests hold is bounded, and anonymous downloads cannot take every descriptor."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobalt.executor import bodies
from cobalt.executor.admission import Admission
from cobalt.executor.bodies import BodyParser
from cobalt.executor.fd_budget import FDS_PER_SLOT, RESERVED_FDS, connection_limit
from cobalt.executor.judge import skipped
from cobalt.executor.program_memory import request_bytes as _request_bytes
from cobalt.shared.contracts import CallTest, ExecuteRequest
from cobalt.shared.docs import MAX_ASSET_DOWNLOADS, AtMostAtOnce
from cobalt.shared.errors import Overloaded

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
    """Under `lcb` each of the first 256 call tests replays the calls before it: 100 tests
    of 100 KB of arguments hold about 100 x 100 / 2 x 100 KB of replay text at most, and
    admission counts it (a queue of 512 MiB then takes one such request at a time)."""
    args = ["x" * 100_000]
    tests = [CallTest(fn_name="f", args=args, expected=1) for _ in range(100)]
    plain = ExecuteRequest(code="def f(s):\n    return 1\n", tests=tests)
    lcb = ExecuteRequest(code=plain.code, tests=tests, compare="lcb")
    replayed = sum(i * len(json.dumps([args, {}, 1])) for i in range(100))
    assert _request_bytes(lcb) >= _request_bytes(plain) + replayed


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

    big = body(1_200_000, 20)
    small = json.dumps(
        {"code": "print(2)", "tests": [{"stdin": "x" * (1 << 20), "expected_stdout": "2"}]}
    ).encode()
    took: dict[str, float] = {}

    async def parse(name: str, data: bytes) -> None:
        started = time.monotonic()
        await parser.parse(data, ExecuteRequest)
        took[name] = time.monotonic() - started

    async def main() -> None:
        bigs = [asyncio.create_task(parse(f"big{i}", big)) for i in range(2)]
        await asyncio.sleep(0.05)  # both big ones are in their processes
        await asyncio.gather(parse("small", small), *bigs)

    try:
        asyncio.run(main())
    finally:
        parser.close()
    # Behind them it would wait for a whole big parse; in its own lane, only for itself.
    assert took["small"] < 0.5 * min(took["big0"], took["big1"]), took
