"""The judge is total: any outcome a program can produce gets a per-test verdict.

A hostile program controls its exit status (any code, any signal, real-time ones too),
every byte on stdout, stderr and the record pipe, and the value it returns; callers
control test data (lone surrogates, huge integers). Hypothesis drives `judge` with such
outcomes; the verdict must come back as an encodable result, never an exception, and
must never be "accepted" unless the trusted side saw the harness start.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobalt.executor.compare import values_match
from cobalt.executor.judge import judge, parse_record, signal_name
from cobalt.executor.sandbox import RawRun, SandboxJob
from cobalt.executor.values import MAX_PLAIN_INT_DIGITS, LargeInt, dumps_value, loads_value
from cobalt.shared.contracts import CallTest, Compare, StdinTest, Verdict

NONCE = "ab" * 16

# Text that includes lone surrogates (valid in JSON, not in UTF-8).
texts = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
    st.builds(lambda n: LargeInt("9" * n), st.integers(MAX_PLAIN_INT_DIGITS + 1, 6000)),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=20,
)


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


record_lines = st.one_of(
    st.binary(max_size=64),
    st.builds(lambda v: f"{NONCE} {dumps_value(v)}\n".encode(), json_values),
    st.builds(
        lambda status, value: f"{NONCE} {json.dumps({'status': status})}\n{value}".encode(
            "utf-8", "replace"
        ),
        st.sampled_from(["returned", "done", "raised", "unserializable", "missing", "x"]),
        st.one_of(
            st.builds(dumps_value, json_values),
            st.integers(1, 50_000).map(_deep),
            st.integers(4301, 20_000).map(lambda n: "7" * n),
            st.just("NaN"),
            texts,
        ),
    ),
    st.integers(1, 50_000).map(lambda n: f"{NONCE} {_deep(n)}\n".encode()),
)
statuses = st.one_of(
    st.none(),
    st.integers(0, 255).map(lambda code: code << 8),  # exited with `code`
    st.integers(1, 64),  # killed by any signal, real-time ones included
    st.integers(1, 64).map(lambda sig: sig | 0x80),  # killed, core dumped
)


@st.composite
def raw_runs(draw: st.DrawFn) -> RawRun:
    return RawRun(
        nonce=draw(st.sampled_from([NONCE, ""])),
        status=draw(statuses),
        cpu_ms=draw(st.floats(0, 1e7)),
        wall_ms=draw(st.floats(0, 1e7)),
        max_rss_kb=draw(st.integers(0, 1 << 40)),
        stdout=draw(st.binary(max_size=200)),
        stderr=draw(st.binary(max_size=200)),
        record=b"".join(draw(st.lists(record_lines, max_size=3))),
        deadline_exceeded=draw(st.booleans()),
        output_exceeded=draw(st.booleans()),
        memory_exceeded=draw(st.booleans()),
        slot_died=draw(st.booleans()),
        started=draw(st.booleans()),
    )


tests = st.one_of(
    # Built without validation, as the call tests below: JSON request data may hold lone
    # surrogates, which this pydantic refuses in a str field built from Python.
    st.builds(
        lambda stdin, expected: StdinTest.model_construct(stdin=stdin, expected_stdout=expected),
        texts,
        texts,
    ),
    st.builds(
        lambda args, expected: CallTest.model_construct(
            fn_name="f", args=args, kwargs={}, expected=expected
        ),
        st.lists(json_values, max_size=3),
        json_values,
    ),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(test=tests, raw=raw_runs(), compare=st.sampled_from(list(Compare)))
def test_any_outcome_gets_a_verdict_never_an_exception(
    test: StdinTest | CallTest, raw: RawRun, compare: Compare
) -> None:
    job = SandboxJob(code="", mode="stdin", memory_mb=16, cpu_s=1.0, wall_s=1.0)
    result = judge(test, job, raw, compare=compare, feedback_chars=200, stream_chars=200)
    # The response can always be sent: it encodes as UTF-8 JSON.
    result.model_dump_json().encode("utf-8")
    if not raw.started:
        assert result.verdict in (Verdict.SANDBOX_ERROR, Verdict.TIME_LIMIT, Verdict.OUTPUT_LIMIT)
    if result.verdict is Verdict.ACCEPTED:
        assert raw.started and raw.exit_code == 0 and not raw.slot_died


@given(number=st.integers(1, 64))
def test_every_signal_has_a_name(number: int) -> None:
    assert signal_name(number)
    if number >= 34:
        assert "RT" in signal_name(number)


@given(value=json_values)
def test_values_survive_a_round_trip_and_equal_themselves(value: Any) -> None:
    decoded = loads_value(dumps_value(value))
    same_nan = json.dumps(value, default=repr) == json.dumps(decoded, default=repr)
    assert same_nan
    # Under lcb and humaneval the returned side is the harness's typed form (a JSON object
    # is a tag there), compared with Python's == (tests/executor/test_compare.py).
    for mode in (Compare.COBALT, Compare.LINES, Compare.FLOAT):
        # NaN never equals itself exactly; every other value does.
        if "NaN" not in dumps_value(value):
            assert values_match(decoded, value, mode)


def test_huge_integers_compare_without_conversion() -> None:
    big = "1" + "0" * 5000
    assert values_match(loads_value(big), loads_value(big), Compare.COBALT)
    assert not values_match(loads_value(big), loads_value(big[:-1] + "1"), Compare.COBALT)
    # Under the float comparator an integer beyond float's range is compared exactly.
    assert not values_match(10**400, 1e300, Compare.FLOAT)
    assert values_match(10**400, 10**400, Compare.FLOAT)
    assert values_match(loads_value(big), loads_value(big), Compare.FLOAT)
    assert not values_match(loads_value(big), 1.0, Compare.FLOAT)


def test_deeply_nested_values_compare_without_recursion() -> None:
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    assert values_match(deep, deep, Compare.COBALT)


def test_a_record_without_the_nonce_is_no_record() -> None:
    forged = b'0000 {"status": "returned"}\n42'
    assert parse_record(forged, NONCE).status is None
    good = f'{NONCE} {{"status": "returned"}}\n42'.encode()
    assert parse_record(b"junk\n" + good, NONCE).value == "42"


def test_exit_status_helpers_cover_every_wait_status() -> None:
    for sig in range(1, 65):
        raw = RawRun(nonce=NONCE, status=sig)
        assert raw.signal == sig and raw.exit_code is None
    assert RawRun(nonce=NONCE, status=os.W_OK << 8).exit_code == os.W_OK
