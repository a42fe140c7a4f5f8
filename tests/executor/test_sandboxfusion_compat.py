"""`POST /run_code` speaks SandboxFusion as verl uses it.

The payloads below are byte-for-byte what verl's SandboxFusion client sends, and each
response is read the way verl reads it. Sources (read when this file was written):

- bytedance/SandboxFusion @ 469de0845cb7d665bc68044d541aa3aa28c5b30a
  sandbox/server/sandbox_api.py (RunCodeRequest, RunStatus, RunCodeResponse,
  parse_run_status) and sandbox/runners/types.py (CommandRunStatus, CommandRunResult).
- volcengine/verl @ b178a3cd56f58b2d502255daba591e92833930a7
  verl/utils/reward_score/sandbox_fusion/utils.py (call_sandbox_api builds the payload;
  _process_single_case reads `status`, `compile_result` and `run_result.{status, stdout,
  stderr, return_code, execution_time}`), verl/tools/sandbox_fusion_tools.py (the
  multi-turn tool: stdin None, timeout 30, reads stdout + stderr) and
  examples/tutorial/agent_loop_get_started/sandbox.py (posts {"code": ...} only).

Where SandboxFusion and this executor still differ on purpose (a 422 for languages it does
not run and for `fetch_files`), the tests say so next to the case; a full queue is held,
then a 504 verl retries (test_no_silent_zeros.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from enum import StrEnum
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, ConfigDict

from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings

# --- SandboxFusion's response models, as declared upstream (extra fields forbidden here,
#     so a field we add or rename shows up) ----------------------------------------------


class CommandRunStatus(StrEnum):
    Finished = "Finished"
    Error = "Error"
    TimeLimitExceeded = "TimeLimitExceeded"


class CommandRunResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: CommandRunStatus
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunStatus(StrEnum):
    Success = "Success"
    Failed = "Failed"
    SandboxError = "SandboxError"


class SandboxFusionRunCodeResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: RunStatus
    message: str
    compile_result: CommandRunResult | None = None
    run_result: CommandRunResult | None = None
    executor_pod_name: str | None = None
    files: dict[str, str] = {}


RESPONSE_FIELDS = {
    "status",
    "message",
    "compile_result",
    "run_result",
    "executor_pod_name",
    "files",
}
RUN_RESULT_FIELDS = {"status", "execution_time", "return_code", "stdout", "stderr"}

# --- verl's client, reproduced ------------------------------------------------------------

VERL_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
VERL_DEFAULT_TIMEOUT = 10  # utils.DEFAULT_TIMEOUT; compile and run share it
VERL_TOOL_TIMEOUT = 30  # SandboxFusionTool default_timeout
VERL_MEMORY_LIMIT_MB = 1024  # reward_model.sandbox_fusion.memory_limit_mb default
VERL_OTHER_LANGUAGES = ["bash", "python_gpu", "pytest"]
"""SandboxFusion languages this executor does not run (it runs cpp, c, java, nodejs, go
and rust where their toolchains are installed: tests/executor/test_languages.py)."""
VERL_COMPILED = {
    "cpp": '#include <iostream>\nint main(){long a,b;std::cin>>a>>b;std::cout<<a+b<<"\\n";}\n',
    "java": "import java.util.*;\npublic class Main{public static void main(String[] x){"
    "Scanner s=new Scanner(System.in);System.out.println(s.nextLong()+s.nextLong());}}\n",
}


def verl_payload(
    code: str,
    stdin: str | None,
    timeout: int = VERL_DEFAULT_TIMEOUT,
    memory_limit_mb: int = VERL_MEMORY_LIMIT_MB,
    language: str = "python",
) -> str:
    """The body call_sandbox_api posts: same keys, order and value types (ints, None)."""
    return json.dumps(
        {
            "compile_timeout": timeout,
            "run_timeout": timeout,
            "code": code,
            "stdin": stdin,
            "memory_limit_MB": memory_limit_mb,
            "language": language,
            "files": {},
            "fetch_files": [],
        }
    )


# _process_single_case's function-call wrapper, verbatim (an f-string upstream; here a
# str.format template with the same text, so the generated program is identical).
VERL_FN_WRAPPER = """
import traceback
from string import *
from re import *
from datetime import *
from collections import *
from heapq import *
from bisect import *
from copy import *
from math import *
from random import *
from statistics import *
from itertools import *
from functools import *
from operator import *
from io import *
from sys import *
from json import *
from builtins import *
from typing import *
import string
import re
import datetime
import collections
import heapq
import bisect
import copy
import math
import random
import statistics
import itertools
import functools
import operator
import io
import sys
import json

# === User's Original Code START ===
{generation}
# === User's Original Code END ===

_SANDBOX_FN_NAME = "{fn_name}"

def _execute_user_function():
    # --- Input Parsing ---
    _raw_input_str = sys.stdin.read()
    _args = []
    if _raw_input_str.strip(): # If there's input
        try:
            _args = [json.loads(line) for line in _raw_input_str.split('\\n')]
        except json.JSONDecodeError as _je:
            sys.stderr.write(f"WrapperError: Invalid JSON input for '{{_SANDBOX_FN_NAME}}': {{_je}}\\nInput was: "
                              f"{{_raw_input_str[:200]}}\\n")
            return None, True # result, error_occurred

    # --- Function Location and Execution ---
    try:
        _target_callable = None
        # Try global scope first
        if _SANDBOX_FN_NAME in globals():
            _target_callable = globals()[_SANDBOX_FN_NAME]
        # Else, if 'Solution' class exists, try to get its method
        elif 'Solution' in globals():
            _Solution_class = globals()['Solution']
            # Attempt to instantiate and get method.
            # Errors (e.g., Solution not a class, instantiation fails, method missing)
            # will be caught by the broad except block below.
            _solution_instance = _Solution_class()
            _target_callable = getattr(_solution_instance, _SANDBOX_FN_NAME)

        if not _target_callable:
            sys.stderr.write(f"WrapperError: Function or method '{{_SANDBOX_FN_NAME}}' not found.\\n")
            return None, True # result, error_occurred

        _fn_result = _target_callable(*_args)
        return _fn_result, False # result, no_error
    except Exception: # Catches errors from Solution instantiation, getattr, or function call
        sys.stderr.write(f"Error during setup or execution of '{{_SANDBOX_FN_NAME}}':\\n{{traceback.format_exc()}}\\n")
        return None, True # result, error_occurred

if __name__ == '__main__':
    _result, _error_occurred = _execute_user_function()

    if not _error_occurred:
        # Serialize result to stdout
        if isinstance(_result, (dict, list, tuple)) or _result is None or isinstance(_result, bool):
            print(json.dumps(_result))
        elif isinstance(_result, (int, float, str)):
            print(str(_result)) # Ensure string conversion for print
        else:
            # For other types, default to string representation.
            print(str(_result))
    # Optional: To explicitly exit with an error code if the sandbox relies on it
    # else:
    #    sys.exit(1)
"""  # noqa: E501


def verl_code(generation: str, fn_name: str | None = None, assert_case: str = "") -> str:
    """The code verl sends for one case: check_correctness appends the assert case, and
    _process_single_case wraps function-call problems."""
    generation = generation + "\n\n" + assert_case
    if fn_name:
        return VERL_FN_WRAPPER.format(generation=generation, fn_name=fn_name)
    return generation


def verl_case_result(api_response: dict[str, Any], expected_output: str | None) -> bool | int:
    """_process_single_case's verdict for a 2xx response, same branches, same order.

    True / False: ran and matched / did not match; -1 sandbox or unknown error;
    -2 runtime error; -3 timeout; -4 compile error.
    """
    compile_result = api_response.get("compile_result")
    run_result = api_response.get("run_result")
    api_status = api_response.get("status")
    compile_status = compile_result.get("status") if compile_result else None
    run_status = run_result.get("status") if run_result else None
    if api_status == "SandboxError":
        return -1
    if api_status == "Failed":
        is_compile_error = compile_result and (
            compile_status in ["Error", "TimeLimitExceeded"]
            or (compile_status == "Finished" and compile_result.get("return_code") != 0)
        )
        if is_compile_error:
            return -4
        if run_result:
            if run_status == "TimeLimitExceeded":
                return -3
            if run_status == "Error" or (
                run_status == "Finished" and run_result.get("return_code") != 0
            ):
                return -2
            return -1  # "unknown_failure"
        return -1  # "unknown_failure_state"
    if api_status == "Success":
        if run_result and run_status == "Finished":
            stdout = run_result.get("stdout")
            actual_output = stdout if stdout is not None else ""
            if expected_output is None or str(actual_output).rstrip("\n") == str(
                expected_output
            ).rstrip("\n"):
                return True
            return False
        return -1  # "unexpected_success_state"
    return -1


# --- helpers ------------------------------------------------------------------------------


def run_code(client: TestClient, payload: str) -> dict[str, Any]:
    """POST like verl (requests.post(url, headers=..., data=payload)); verl calls
    raise_for_status(), so anything but 2xx would be an API error (-1) for it."""
    response = client.post("/run_code", content=payload, headers=VERL_HEADERS)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == RESPONSE_FIELDS, sorted(body)
    SandboxFusionRunCodeResponse.model_validate(body)
    # Python has no compile step in SandboxFusion: compile_result is null, and verl's
    # compile-error branch (-4) must never fire for it.
    assert body["files"] == {}
    if json.loads(payload).get("language", "python") != "python":
        return body  # compiled: compile_result set, run_result null after a compile error
    assert body["compile_result"] is None
    run = body["run_result"]
    assert run is not None and set(run) == RUN_RESULT_FIELDS, run
    # verl's multi-turn tool concatenates stdout + stderr of a finished run; both must be
    # strings, never null.
    assert isinstance(run["stdout"], str) and isinstance(run["stderr"], str)
    assert isinstance(run["execution_time"], float) and run["execution_time"] >= 0
    return body


def assert_failed_run(body: dict[str, Any], run_status: str) -> dict[str, Any]:
    assert body["status"] == "Failed", body
    assert body["run_result"]["status"] == run_status, body
    run: dict[str, Any] = body["run_result"]
    return run


# --- runs that finish -----------------------------------------------------------------


def test_successful_program(executor_client: TestClient) -> None:
    body = run_code(executor_client, verl_payload(verl_code("print('hello')"), stdin=None))
    assert body["status"] == "Success"
    assert body["message"] == ""
    run = body["run_result"]
    assert run["status"] == "Finished"
    assert run["return_code"] == 0
    assert run["stdout"] == "hello\n"
    assert run["stderr"] == ""
    assert verl_case_result(body, "hello") is True
    assert verl_case_result(body, None) is True  # assert_case problems expect no output


def test_multi_turn_tool_payload(executor_client: TestClient) -> None:
    # SandboxFusionTool.execute_code: _process_single_case(0, None, None, url, code, 30,
    # 1024, "python"), then returns stdout + stderr when run_result.status is Finished.
    code = "import sys\nprint(6 * 7)\nprint('note', file=sys.stderr)"
    body = run_code(executor_client, verl_payload(code, stdin=None, timeout=VERL_TOOL_TIMEOUT))
    run = body["run_result"]
    assert run["status"] == "Finished"
    assert run["stdout"] + run["stderr"] == "42\nnote\n"
    assert body["status"] == "Success"  # stderr output alone is not a failure


def test_tutorial_code_only_payload(executor_client: TestClient) -> None:
    # The agent-loop tutorial posts {"code": ...} only and reads run_result.stdout/stderr.
    # (Real SandboxFusion requires `language`; accepting its absence is a harmless superset.)
    response = executor_client.post("/run_code", json={"code": "print(sum(range(10)))"})
    assert response.status_code == 200, response.text
    result = response.json()["run_result"]
    assert result["stdout"] + result["stderr"] == "45\n"


def test_program_reading_stdin(executor_client: TestClient) -> None:
    generation = "a, b = map(int, input().split())\nprint(a + b)\nprint(a * b)"
    body = run_code(executor_client, verl_payload(verl_code(generation), stdin="6 7\n"))
    assert body["status"] == "Success"
    assert body["run_result"]["stdout"] == "13\n42\n"
    assert verl_case_result(body, "13\n42") is True
    assert verl_case_result(body, "13\n42\n\n") is True  # verl strips trailing newlines
    assert verl_case_result(body, "13\n43") is False


@pytest.mark.parametrize(
    ("generation", "fn_name", "stdin", "expected"),
    [
        ("def add(a, b):\n    return a + b", "add", "2\n40", "42"),
        (
            "from typing import List\n\n"
            "class Solution:\n"
            "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
            "        seen = {}\n"
            "        for i, n in enumerate(nums):\n"
            "            if target - n in seen:\n"
            "                return [seen[target - n], i]\n"
            "            seen[n] = i\n",
            "twoSum",
            "[2, 7, 11, 15]\n9",
            "[0, 1]",
        ),
    ],
    ids=["function", "leetcode-class"],
)
def test_function_call_wrapper(
    executor_client: TestClient, generation: str, fn_name: str, stdin: str, expected: str
) -> None:
    code = verl_code(generation, fn_name=fn_name)
    body = run_code(executor_client, verl_payload(code, stdin=stdin))
    assert body["status"] == "Success", body
    assert verl_case_result(body, expected) is True, body["run_result"]


def test_assert_case_problems(executor_client: TestClient) -> None:
    # compute_score with "assert_case": inputs default to "", outputs to None.
    generation = "def square(x):\n    return x * x"
    passing = verl_code(generation, assert_case="assert square(7) == 49")
    body = run_code(executor_client, verl_payload(passing, stdin=""))
    assert verl_case_result(body, None) is True

    failing = verl_code(generation, assert_case="assert square(7) == 48")
    body = run_code(executor_client, verl_payload(failing, stdin=""))
    run = assert_failed_run(body, "Finished")
    assert run["return_code"] == 1
    assert "AssertionError" in run["stderr"]
    assert verl_case_result(body, None) == -2


# --- runs that fail -------------------------------------------------------------------


def test_crash_reports_nonzero_exit_and_stderr(executor_client: TestClient) -> None:
    code = verl_code("print('partial', flush=True)\nraise ValueError('boom')")
    body = run_code(executor_client, verl_payload(code, stdin=""))
    run = assert_failed_run(body, "Finished")
    assert run["return_code"] == 1
    assert run["stdout"] == "partial\n"
    assert run["stderr"].startswith("Traceback (most recent call last):")
    assert run["stderr"].rstrip().endswith("ValueError: boom")
    assert verl_case_result(body, "partial") == -2


@pytest.mark.parametrize(
    ("generation", "return_code", "stderr"),
    [
        ("import sys\nsys.exit(3)", 3, ""),
        ("def f(:\n    pass", 1, "SyntaxError"),
        ("import os\nos.kill(os.getpid(), 9)", -9, ""),
    ],
    ids=["exit-3", "syntax-error", "sigkill"],
)
def test_other_failures_are_runtime_errors_for_verl(
    executor_client: TestClient, generation: str, return_code: int, stderr: str
) -> None:
    body = run_code(executor_client, verl_payload(verl_code(generation), stdin=None))
    run = assert_failed_run(body, "Finished")
    assert run["return_code"] == return_code
    assert stderr in run["stderr"]
    assert verl_case_result(body, "") == -2


@pytest.mark.parametrize(
    "generation",
    ["print('started', flush=True)\nwhile True:\n    pass", "import time\ntime.sleep(60)"],
    ids=["cpu-loop", "sleep"],
)
def test_timeout(executor_client: TestClient, generation: str) -> None:
    body = run_code(executor_client, verl_payload(verl_code(generation), stdin=None, timeout=1))
    run = assert_failed_run(body, "TimeLimitExceeded")
    assert 0.9 <= run["execution_time"] < 5
    if "started" in generation:
        assert run["stdout"] == "started\n"  # output before the kill is kept, as upstream
    # (SandboxFusion leaves return_code null on a timeout; verl never reads it there.)
    assert verl_case_result(body, "started") == -3


@pytest.mark.parametrize(
    ("memory_limit_mb", "allocate_mb"),
    [(VERL_MEMORY_LIMIT_MB, 2048), (64, 256)],
    ids=["verl-default-1024", "64"],
)
def test_memory_limit_exceeded(
    executor_client: TestClient, memory_limit_mb: int, allocate_mb: int
) -> None:
    code = verl_code(f"print('before', flush=True)\nblock = bytearray({allocate_mb} << 20)")
    body = run_code(
        executor_client, verl_payload(code, stdin=None, memory_limit_mb=memory_limit_mb)
    )
    run = assert_failed_run(body, "Finished")
    assert run["return_code"] != 0
    assert "MemoryError" in run["stderr"]
    assert run["stdout"] == "before\n"
    assert verl_case_result(body, "before") == -2


def test_memory_within_limit_runs(executor_client: TestClient) -> None:
    code = verl_code("block = bytearray(256 << 20)\nprint(len(block) >> 20)")
    body = run_code(executor_client, verl_payload(code, stdin=None))
    assert body["status"] == "Success", body
    assert verl_case_result(body, "256") is True


def test_verl_default_timeouts_are_accepted(executor_client: TestClient) -> None:
    for timeout in (VERL_DEFAULT_TIMEOUT, VERL_TOOL_TIMEOUT):
        body = run_code(executor_client, verl_payload("print(1)", stdin=None, timeout=timeout))
        assert verl_case_result(body, "1") is True


# --- requests this executor cannot serve ----------------------------------------------


@pytest.mark.parametrize("language", [*VERL_OTHER_LANGUAGES, "cobol"])
def test_unsupported_language_is_a_clear_4xx(executor_client: TestClient, language: str) -> None:
    payload = verl_payload("int main() { return 0; }", stdin=None, language=language)
    response = executor_client.post("/run_code", content=payload, headers=VERL_HEADERS)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "unsupported"
    assert repr(language) in error["message"] and "python" in error["message"]


@pytest.mark.parametrize("language", sorted(VERL_COMPILED))
def test_verl_judges_cpp_and_java_right(executor_client: TestClient, language: str) -> None:
    info = executor_client.get("/v1/info").json()
    if language not in info["languages"]:
        pytest.skip(f"{language}'s toolchain is not installed")
    code = VERL_COMPILED[language]
    correct = verl_payload(code, "20 22", language=language)
    assert verl_case_result(run_code(executor_client, correct), "42") is True
    wrong = verl_payload(code, "1 1", language=language)
    assert verl_case_result(run_code(executor_client, wrong), "3") is False
    broken = verl_payload(code + "\nbroken(\n", "1 1", language=language)
    assert verl_case_result(run_code(executor_client, broken), "2") == -4


def test_fetch_files_is_a_clear_4xx(executor_client: TestClient) -> None:
    # verl always sends files={} and fetch_files=[]; tinker-cookbook sends files.
    payload = json.loads(verl_payload("print(open('data.txt').read())", stdin=None))
    payload["files"] = {"data.txt": "aGVsbG8="}
    response = executor_client.post("/run_code", json=payload)
    assert response.status_code == 200, response.text
    assert response.json()["run_result"]["stdout"] == "hello\n"
    payload["fetch_files"] = ["out.txt"]
    response = executor_client.post("/run_code", json=payload)
    assert response.status_code == 422, response.text
    assert "no network" in response.json()["error"]["message"]


# --- where this executor differs from SandboxFusion in ways that change verl's score ---------


@pytest.fixture
def lenient_client(
    executor_settings: ExecutorSettings, sandbox_pool: SandboxPool
) -> Iterator[TestClient]:
    """A client that returns server errors as responses instead of raising them."""
    app = create_app(executor_settings, pool=sandbox_pool)
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def test_tiny_memory_limit_is_answered_like_sandboxfusion(lenient_client: TestClient) -> None:
    body = run_code(lenient_client, verl_payload("print(1)", stdin=None, memory_limit_mb=8))
    assert body["status"] in ("Success", "Failed")


def test_large_output_is_returned_whole(executor_client: TestClient) -> None:
    size = 2_000_000
    body = run_code(executor_client, verl_payload(f"print('a' * {size})", stdin=None))
    assert body["status"] == "Success", body["message"]
    assert body["run_result"]["return_code"] == 0
    assert len(body["run_result"]["stdout"]) == size + 1
    assert verl_case_result(body, "a" * size) is True
