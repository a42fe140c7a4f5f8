"""ScaleBox's `/common_evaluate_batch`: one completion, all its test cases, one request.

ScaleBox's client lives in verl recipes, not on PyPI, so the request here is the shape
its README and tests post (icip-cas/ScaleBox: a fenced completion, `config.language`,
`compile_timeout`, `run_timeout`, `provided_data.test_cases` with parallel `input` and
`output` lists, `extra.run_all_cases`), and the answer is read as its EvalResult.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from cobalt.executor.scalebox import extract_code


def scalebox_request(completion: str, cases: dict[str, Any], **config: Any) -> dict[str, Any]:
    return {
        "completion": f"Here you go:\n```python\n{completion}\n```\n",
        "config": {
            "language": "python",
            "compile_timeout": 10,
            "run_timeout": 60,
            "provided_data": {"test_cases": cases},
            "extra": {"run_all_cases": True},
            **config,
        },
    }


STDIO = {"type": "stdin_stdout", "input": ["1 2", "3 4"], "output": ["3", "7"], "fn_name": None}
ADD = "def add(a, b):\n    return a + b\na, b = map(int, input().split())\nprint(add(a, b))"


def test_a_right_and_a_wrong_stdio_completion(executor_client: TestClient) -> None:
    right = executor_client.post("/common_evaluate_batch", json=scalebox_request(ADD, STDIO))
    assert right.status_code == 200, right.text
    body = right.json()
    assert body["accepted"] is True
    assert body["extracted_code"].strip() == ADD
    assert [t["passed"] for t in body["tests"]] == [True, True]
    assert body["tests"][1]["exec_info"]["run_result"]["stdout"] == "7\n"

    wrong = scalebox_request(ADD.replace("a + b", "a * b"), STDIO)
    body = executor_client.post("/common_evaluate_batch", json=wrong).json()
    assert body["accepted"] is False
    assert [t["passed"] for t in body["tests"]] == [False, False]  # 1*2=2, 3*4=12


def test_function_call_cases_are_call_tests(executor_client: TestClient) -> None:
    cases = {
        "type": "function_call",
        "fn_name": "add",
        "input": [[1, 2], [5, 5]],
        "output": [3, 11],
    }
    body = executor_client.post(
        "/common_evaluate_batch", json=scalebox_request("def add(a, b):\n    return a + b", cases)
    ).json()
    assert [t["passed"] for t in body["tests"]] == [True, False]
    assert body["accepted"] is False


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"language": "cobol"}, "config.language 'cobol'"),
        ({"run_timeout": 61}, "config.run_timeout is 61"),
        (
            {"provided_data": {"test_cases": {"type": "assert", "input": ["x"], "output": ["y"]}}},
            "assert",
        ),
        ({"provided_data": {"test_cases": {"input": ["1"], "output": []}}}, "test_cases"),
    ],
    ids=["language", "timeout", "assert", "unpaired"],
)
def test_what_cannot_run_is_a_422_naming_it(
    executor_client: TestClient, change: dict[str, Any], says: str
) -> None:
    request = scalebox_request(ADD, STDIO)
    request["config"].update(change)
    response = executor_client.post("/common_evaluate_batch", json=request)
    assert response.status_code == 422, response.text
    assert says in response.json()["error"]["message"]


def test_code_is_the_last_block_of_the_language() -> None:
    text = "```text\nnot code\n```\n```python\nfirst\n```\n```py\nsecond\n```\n"
    assert extract_code(text, "python") == "second\n"
    assert extract_code("```\nplain\n```", "python") == "plain\n"
    assert extract_code("print(1)", "python") == "print(1)"


CASE_VALUES = st.none() | st.integers() | st.text(max_size=12) | st.lists(st.integers(), max_size=3)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    language=st.sampled_from(["python", "nodejs", "cpp", "", "x" * 70]),
    kind=st.sampled_from(["stdin_stdout", "function_call", "assert", None, "other"]),
    inputs=st.lists(CASE_VALUES, max_size=3),
    outputs=st.lists(CASE_VALUES, max_size=3),
    fn_name=st.none() | st.sampled_from(["f", "", "1bad"]),
    run_timeout=st.floats(-1, 700) | st.text(max_size=3),
)
def test_no_scalebox_request_becomes_a_5xx(
    executor_client: TestClient,
    language: str,
    kind: str | None,
    inputs: list[Any],
    outputs: list[Any],
    fn_name: str | None,
    run_timeout: Any,
) -> None:
    cases = {"type": kind, "input": inputs, "output": outputs, "fn_name": fn_name}
    request = scalebox_request("print(input())", cases, language=language)
    request["config"]["run_timeout"] = (
        min(run_timeout, 2.0) if isinstance(run_timeout, float) and run_timeout > 0 else run_timeout
    )
    response = executor_client.post("/common_evaluate_batch", json=request)
    assert response.status_code in (200, 422), response.text
    if response.status_code == 200:
        body = response.json()
        assert len(body["tests"]) == len(inputs) == len(outputs)
        assert body["accepted"] == all(test["passed"] for test in body["tests"])
