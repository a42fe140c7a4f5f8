"""`cobalt exec run`: in-process on a real sandbox, and against a real executor over HTTP."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from typer.testing import CliRunner

from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.commands import app
from cobalt.shared.contracts import ExecuteResponse
from cobalt.shared.ports import free_port

TOKEN = "cli-test-token"
DOUBLE = "print(int(input()) * 2)\n"
# No executor configured in the environment: the command must run in-process.
LOCAL_ENV: dict[str, str | None] = {
    "COBALT_EXECUTOR_URL": None,
    "COBALT_EXECUTOR_AUTH_TOKEN": None,
}

runner = CliRunner()


def write_case(tmp_path: Path, tests: Any, code: str = DOUBLE) -> tuple[Path, Path]:
    program = tmp_path / "solution.py"
    program.write_text(code)
    tests_file = tmp_path / "tests.json"
    tests_file.write_text(tests if isinstance(tests, str) else json.dumps(tests))
    return program, tests_file


def invoke(*args: str | Path, env: dict[str, str | None] | None = None) -> Any:
    return runner.invoke(app, ["exec", "run", *map(str, args)], env=env or LOCAL_ENV)


def verdicts(stdout: str) -> list[str]:
    response = ExecuteResponse.model_validate_json(stdout)
    return [result.verdict.value for result in response.results]


def assert_one_error_line(result: Any, code: int, *fragments: str) -> None:
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in result.output


# --- in-process, on a real sandbox ------------------------------------------------------


def test_local_all_passed_exits_0_with_a_table(tmp_path: Path) -> None:
    program, tests = write_case(
        tmp_path,
        [{"stdin": "21", "expected_stdout": "42"}, {"stdin": "0", "expected_stdout": "0"}],
    )

    result = invoke(program, "--tests", tests)

    assert result.exit_code == 0, result.output
    assert "accepted" in result.stdout
    assert "passed 2/2" in result.stdout


def test_local_some_failed_exits_1_and_json_is_one_object(tmp_path: Path) -> None:
    program, tests = write_case(
        tmp_path,
        [{"stdin": "21", "expected_stdout": "42"}, {"stdin": "2", "expected_stdout": "5"}],
    )

    result = invoke(program, "--tests", tests, "--json")

    assert result.exit_code == 1, result.output
    assert verdicts(result.stdout) == ["accepted", "wrong_answer"]
    assert json.loads(result.stdout)["passed"] == 1


def test_a_wrong_answer_shows_its_input_expected_and_actual_output(tmp_path: Path) -> None:
    long_input = "7" * 5000  # cut in the middle, as the executor cuts feedback fields
    program, tests = write_case(
        tmp_path,
        [
            {"stdin": "21", "expected_stdout": "42"},
            {"stdin": "3", "expected_stdout": "7"},
            {"stdin": long_input, "expected_stdout": "1"},
        ],
    )

    result = invoke(program, "--tests", tests)

    assert result.exit_code == 1, result.output
    out = result.stdout
    # Test 2 in full: which input, what was expected, what the program printed.
    second = out[out.index("test 2: wrong_answer") :]
    assert "Input:" in second and "Expected output:" in second and "Your output:" in second
    sections = [line.strip("│ ").strip() for line in second.splitlines()[1:7]]
    assert sections == ["Input:", "3", "Expected output:", "7", "Your output:", "6"]
    third = out[out.index("test 3: wrong_answer") :]
    assert "characters omitted" in third and long_input not in out
    assert "test 1:" not in out  # passing tests are not repeated
    assert "passed 1/3" in out


def test_a_syntax_error_is_shown_once_as_a_compile_error(tmp_path: Path) -> None:
    program, tests = write_case(
        tmp_path,
        [{"stdin": str(i), "expected_stdout": str(2 * i)} for i in range(4)],
        code="def double(n:\n    return 2 * n\n",
    )

    result = invoke(program, "--tests", tests)

    assert result.exit_code == 1, result.output
    assert "compile error" in result.stdout
    assert result.stdout.count("SyntaxError") == 1
    assert "runtime_error" not in result.stdout  # not one runtime error per test
    assert "passed 0/4" in result.stdout
    # --json keeps the executor's contract: one runtime error per test.
    assert verdicts(invoke(program, "--tests", tests, "--json").stdout) == ["runtime_error"] * 4


def test_runtime_errors_that_differ_are_not_a_compile_error(tmp_path: Path) -> None:
    program, tests = write_case(
        tmp_path,
        [{"stdin": "x", "expected_stdout": "1"}, {"stdin": "", "expected_stdout": "1"}],
        code="n = int(input())\nprint(n)\n",
    )

    result = invoke(program, "--tests", tests)

    assert "compile error" not in result.stdout
    assert "test 1: runtime_error" in result.stdout and "test 2: runtime_error" in result.stdout


def test_local_options_reach_the_request(tmp_path: Path) -> None:
    # An object with a "tests" key; float comparison; stop at the first failure.
    program, tests = write_case(
        tmp_path,
        {
            "tests": [
                {"stdin": "0.5", "expected_stdout": "1.0000001"},
                {"stdin": "1", "expected_stdout": "3"},
                {"stdin": "2", "expected_stdout": "4"},
            ]
        },
        code="print(float(input()) * 2)\n",
    )

    result = invoke(
        program,
        "--tests",
        tests,
        "--compare",
        "float",
        "--stop-on-first-failure",
        "--wall-s",
        "2",
        "--memory-mb",
        "256",
        "--json",
    )

    assert result.exit_code == 1, result.output
    assert verdicts(result.stdout) == ["accepted", "wrong_answer", "skipped"]


def test_the_lcb_preset_from_the_command_line(tmp_path: Path) -> None:
    # LiveCodeBench accepts 3.0 for 3 and a program that ends with exit(); the paper's
    # preset accepts neither.
    program, tests = write_case(
        tmp_path, [{"stdin": "3", "expected_stdout": "3"}], code="print(float(input()))\nexit()\n"
    )
    assert invoke(program, "--tests", tests, "--compare", "lcb").exit_code == 0
    result = invoke(program, "--tests", tests, "--json")
    assert result.exit_code == 1, result.output
    assert verdicts(result.stdout) == ["runtime_error"]


def test_an_unknown_preset_exits_2(tmp_path: Path) -> None:
    program, tests = write_case(tmp_path, [{"stdin": "1", "expected_stdout": "2"}])
    result = invoke(program, "--tests", tests, "--compare", "official")
    assert result.exit_code == 2, result.output
    assert "lcb" in result.output and "humaneval" in result.output


# --- input errors: exit 2, one line, no traceback -------------------------------------------


def test_missing_program_file_exits_2(tmp_path: Path) -> None:
    _, tests = write_case(tmp_path, [{"expected_stdout": ""}])
    result = invoke(tmp_path / "absent.py", "--tests", tests)
    assert_one_error_line(result, 2, "absent.py")


def test_missing_tests_file_exits_2(tmp_path: Path) -> None:
    program, _ = write_case(tmp_path, [])
    result = invoke(program, "--tests", tmp_path / "absent.json")
    assert_one_error_line(result, 2, "absent.json")


def test_bad_json_exits_2(tmp_path: Path) -> None:
    program, tests = write_case(tmp_path, '[{"stdin": ')
    result = invoke(program, "--tests", tests)
    assert_one_error_line(result, 2, "not valid JSON")


@pytest.mark.parametrize(
    ("tests", "fragment"),
    [
        ([], "tests"),
        ([{"stdin": "1"}], "expected_stdout"),
        ({"cases": []}, "JSON list of tests"),
        ("42", "JSON list of tests"),
    ],
)
def test_invalid_tests_exit_2(tmp_path: Path, tests: Any, fragment: str) -> None:
    program, tests_file = write_case(tmp_path, tests)
    result = invoke(program, "--tests", tests_file)
    assert_one_error_line(result, 2, fragment)


def test_a_limit_out_of_range_exits_2(tmp_path: Path) -> None:
    program, tests = write_case(tmp_path, [{"stdin": "1", "expected_stdout": "2"}])
    result = invoke(program, "--tests", tests, "--wall-s", "100000")
    assert_one_error_line(result, 2, "limits.wall_s")


def test_a_url_that_is_not_http_exits_2(tmp_path: Path) -> None:
    program, tests = write_case(tmp_path, [{"stdin": "1", "expected_stdout": "2"}])
    result = invoke(program, "--tests", tests, "--url", "executor:8100")
    assert_one_error_line(result, 2, "http://")


# --- against a real executor over HTTP ----------------------------------------------------------


@pytest.fixture(scope="module")
def executor_url(sandbox_pool: SandboxPool) -> Iterator[str]:
    """A real executor (with a token) served by uvicorn on a free local port."""
    settings = ExecutorSettings(slots=2, auth_token=TOKEN, max_pending_tests=512)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings, pool=sandbox_pool), log_config=None, lifespan="on")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    for _ in range(1000):
        if server.started or not thread.is_alive():
            break
        time.sleep(0.01)
    assert server.started, "the test executor did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)
    listener.close()


def test_remote_run_with_url_and_token(tmp_path: Path, executor_url: str) -> None:
    program, tests = write_case(
        tmp_path,
        [{"stdin": "21", "expected_stdout": "42"}, {"stdin": "2", "expected_stdout": "5"}],
    )

    result = invoke(program, "--tests", tests, "--url", executor_url, "--token", TOKEN, "--json")

    assert result.exit_code == 1, result.output
    assert verdicts(result.stdout) == ["accepted", "wrong_answer"]


def test_a_c_program_on_the_command_line_and_its_compile_error_shown_once(
    tmp_path: Path, executor_url: str
) -> None:
    cases = [{"stdin": "21", "expected_stdout": "42"}, {"stdin": "2", "expected_stdout": "4"}]
    code = '#include <stdio.h>\nint main(){int n;scanf("%d",&n);printf("%d\\n",2*n);}\n'
    program, tests = write_case(tmp_path, cases, code=code)
    remote = ["--url", executor_url, "--token", TOKEN, "--language", "c"]

    result = invoke(program, "--tests", tests, *remote)
    assert result.exit_code == 0, result.output

    program.write_text("int main() { return missing_name; }\n")
    result = invoke(program, "--tests", tests, *remote)
    assert result.exit_code == 1, result.output
    assert "compile error" in result.stdout
    assert result.stdout.count("'missing_name' undeclared") == 1, result.stdout
    assert (
        verdicts(invoke(program, "--tests", tests, *remote, "--json").stdout)
        == ["compile_error"] * 2
    )


def test_remote_run_reads_the_environment(tmp_path: Path, executor_url: str) -> None:
    program, tests = write_case(tmp_path, [{"stdin": "21", "expected_stdout": "42"}])
    env: dict[str, str | None] = {
        "COBALT_EXECUTOR_URL": executor_url,
        "COBALT_EXECUTOR_AUTH_TOKEN": TOKEN,
    }

    result = invoke(program, "--tests", tests, env=env)

    assert result.exit_code == 0, result.output
    assert "passed 1/1" in result.stdout


def test_remote_wrong_token_exits_2(tmp_path: Path, executor_url: str) -> None:
    program, tests = write_case(tmp_path, [{"stdin": "21", "expected_stdout": "42"}])
    result = invoke(program, "--tests", tests, "--url", executor_url, "--token", "wrong")
    assert_one_error_line(result, 2, "bearer token")


def test_remote_refusal_exits_2(tmp_path: Path, executor_url: str) -> None:
    program, tests = write_case(tmp_path, [{"stdin": "21", "expected_stdout": "42"}])
    result = invoke(
        program, "--tests", tests, "--url", executor_url, "--token", TOKEN, "--wall-s", "600"
    )
    assert_one_error_line(result, 2, "COBALT_EXECUTOR_MAX_WALL_S")


def test_unreachable_executor_exits_3(tmp_path: Path) -> None:
    program, tests = write_case(tmp_path, [{"stdin": "21", "expected_stdout": "42"}])
    port = free_port()  # nothing listens there
    env: dict[str, str | None] = {**LOCAL_ENV, "COBALT_EXECUTOR_CLIENT_MAX_RETRIES": "0"}

    result = invoke(program, "--tests", tests, "--url", f"http://127.0.0.1:{port}", env=env)

    assert_one_error_line(result, 3, f"127.0.0.1:{port}", "COBALT_EXECUTOR_URL")


@pytest.mark.parametrize(
    ("feedback", "summary"),
    [
        ("Passed.", ""),
        ("Input:\n3\nExpected output:\n7\nYour output:\n6", "Your output: 6"),
        (
            "Input:\nx\nExpected output:\n1\nError (exit code 1):\nTraceback (most recent call"
            ' last):\n  File "solution.py", line 1\nValueError: bad',
            "Error (exit code 1): ValueError: bad",
        ),
        ("Input:\n\nExpected output:\n1\nTime limit exceeded (1 s).", "Time limit exceeded (1 s)."),
    ],
)
def test_table_shows_what_went_wrong(feedback: str, summary: str) -> None:
    from cobalt.executor.report import feedback_summary

    assert feedback_summary(feedback) == summary
