"""The executor's HTTP API against the real sandbox: verdicts, limits, 4xx paths, batch."""

from __future__ import annotations

import json
import re
import signal
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings
from tests.executor.helpers import execute, verdicts, wait_ready

DOUBLER = "print(int(input()) * 2)"


def test_stdin_tests_get_one_verdict_each_in_order(executor_client: TestClient) -> None:
    body = execute(
        executor_client,
        DOUBLER,
        [
            {"stdin": "21\n", "expected_stdout": "42"},
            {"stdin": "3\n", "expected_stdout": "7"},
            {"stdin": "", "expected_stdout": "0"},
        ],
    )
    assert verdicts(body) == ["accepted", "wrong_answer", "runtime_error"]
    assert (body["passed"], body["total"]) == (1, 3)
    assert body["pass_rate"] == pytest.approx(1 / 3)
    assert body["executor_version"].startswith("cobalt-executor/")
    wrong, crash = body["results"][1], body["results"][2]
    assert wrong["stdout"] == "6\n" and wrong["exit_code"] == 0
    assert "Input:\n3" in wrong["feedback"] and "Expected output:\n7" in wrong["feedback"]
    assert "Your output:\n6" in wrong["feedback"]
    assert "EOFError" in crash["stderr"] and "EOFError" in crash["feedback"]
    assert 'File "solution.py"' in crash["stderr"]  # harness frames are hidden


def test_call_tests_top_level_function_and_solution_class(executor_client: TestClient) -> None:
    top_level = "def add(a, b=0):\n    return a + b\n"
    body = execute(
        executor_client,
        top_level,
        [
            {"fn_name": "add", "args": [1, 2], "expected": 3},
            {"fn_name": "add", "args": [1], "kwargs": {"b": 5}, "expected": 6},
            {"fn_name": "add", "args": [[1], [2]], "expected": [1, 2]},
            {"fn_name": "add", "args": [1, 1], "expected": 3},
        ],
    )
    assert verdicts(body) == ["accepted", "accepted", "accepted", "wrong_answer"]
    assert "Your return value:\n2" in body["results"][3]["feedback"]

    leetcode = (
        "class Solution:\n"
        "    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
        "        seen = {}\n"
        "        for i, x in enumerate(nums):\n"
        "            if target - x in seen:\n"
        "                return (seen[target - x], i)\n"
        "            seen[x] = i\n"
    )
    body = execute(
        executor_client,
        leetcode,
        [
            {"fn_name": "twoSum", "args": [[2, 7, 11, 15], 9], "expected": [0, 1]},
            {"fn_name": "threeSum", "args": [[1]], "expected": []},
        ],
    )
    # A returned tuple equals the expected list (JSON has no tuples); List needs no import.
    assert verdicts(body) == ["accepted", "runtime_error"]
    assert "no function 'threeSum'" in body["results"][1]["feedback"]


def test_call_test_unserializable_return_is_wrong_answer(executor_client: TestClient) -> None:
    body = execute(
        executor_client, "def f():\n    return {1, 2}\n", [{"fn_name": "f", "expected": [1, 2]}]
    )
    assert verdicts(body) == ["wrong_answer"]
    assert "set" in body["results"][0]["feedback"]


def test_syntax_error_is_runtime_error_with_message(executor_client: TestClient) -> None:
    body = execute(executor_client, "def f(:\n", [{"stdin": "", "expected_stdout": ""}])
    assert verdicts(body) == ["runtime_error"]
    assert "SyntaxError" in body["results"][0]["stderr"]


@pytest.mark.parametrize(
    ("compare", "output", "expected", "verdict"),
    [
        ("cobalt", "1 2\n", "1 2", "accepted"),
        ("cobalt", "1.0000001", "1", "wrong_answer"),
        ("float", "1.0000001", "1", "accepted"),
        ("lines", "a  \nb\n\n", "a\nb", "accepted"),
        ("lines", "a\n\nb", "a\nb", "wrong_answer"),
    ],
)
def test_compare_modes(
    executor_client: TestClient, compare: str, output: str, expected: str, verdict: str
) -> None:
    code = f"import sys\nsys.stdout.write({output!r})\n"
    body = execute(
        executor_client, code, [{"stdin": "", "expected_stdout": expected}], compare=compare
    )
    assert verdicts(body) == [verdict]


def test_stop_on_first_failure_skips_the_rest(executor_client: TestClient) -> None:
    tests = [
        {"stdin": "1", "expected_stdout": "2"},
        {"stdin": "2", "expected_stdout": "5"},
        {"stdin": "3", "expected_stdout": "6"},
    ]
    body = execute(executor_client, DOUBLER, tests, stop_on_first_failure=True)
    assert verdicts(body) == ["accepted", "wrong_answer", "skipped"]
    assert body["passed"] == 1 and body["total"] == 3


def test_feedback_fields_are_middle_truncated(executor_client: TestClient) -> None:
    big = "7" * 5000
    body = execute(
        executor_client,
        "print(input()[::-1] + 'x')",
        [{"stdin": big, "expected_stdout": big}],
        feedback_chars=120,
        stream_chars=300,
    )
    result = body["results"][0]
    assert result["verdict"] == "wrong_answer"
    assert "characters omitted" in result["feedback"]
    assert len(result["feedback"]) < 600
    assert len(result["stdout"]) <= 300


def test_time_limit_within_ten_percent(executor_client: TestClient) -> None:
    body = execute(
        executor_client,
        "import time\ntime.sleep(30)",
        [{"stdin": "", "expected_stdout": ""}],
        limits={"wall_s": 1.0},
    )
    (result,) = body["results"]
    assert result["verdict"] == "time_limit", result
    assert 900 <= result["wall_ms"] <= 1100, result  # within 10% of the 1 s limit


def test_cpu_limit_gives_time_limit(executor_client: TestClient) -> None:
    body = execute(
        executor_client,
        "while True:\n    pass\n",
        [{"stdin": "", "expected_stdout": ""}],
        limits={"wall_s": 3.0, "cpu_s": 1.0},
    )
    (result,) = body["results"]
    assert result["verdict"] == "time_limit", result
    # The CPU limit (not the 3 s wall limit) stopped it, at about 1 s of CPU. The kernel's
    # CPU clock and the reported usage differ a little under steal time, so the lower
    # bound is looser than the upper one.
    # (No bound on wall time: under load 1 s of CPU takes longer than 3 s of wall clock
    # would allow; the CPU figure shows which limit fired.)
    assert result["signal"] in (signal.SIGXCPU, signal.SIGKILL), result
    assert 750 <= result["cpu_ms"] <= 1100, result


def test_memory_limit_within_ten_percent(executor_client: TestClient) -> None:
    limit_mb = 200
    counting = (
        "import sys\nblocks = []\n"
        "try:\n"
        "    while True:\n"
        "        blocks.append(bytearray(1 << 20))\n"
        "except MemoryError:\n"
        "    n = len(blocks)\n"
        "    blocks = None\n"
        "    sys.stdout.write(str(n))\n"
        "    raise\n"
    )
    body = execute(
        executor_client,
        counting,
        [{"stdin": "", "expected_stdout": ""}],
        limits={"memory_mb": limit_mb, "wall_s": 10},
    )
    (result,) = body["results"]
    assert result["verdict"] == "memory_limit"
    allocated_mb = int(result["stdout"])
    assert 0.9 * limit_mb <= allocated_mb <= 1.1 * limit_mb

    fits = "x = bytearray(160 << 20)\nprint(len(x) >> 20)\n"
    body = execute(
        executor_client,
        fits,
        [{"stdin": "", "expected_stdout": "160"}],
        limits={"memory_mb": limit_mb},
    )
    assert verdicts(body) == ["accepted"]


def test_output_limit(executor_client: TestClient) -> None:
    body = execute(
        executor_client,
        "while True:\n    print('y' * 1000)\n",
        [{"stdin": "", "expected_stdout": ""}],
        limits={"output_kb": 64, "wall_s": 5},
        stream_chars=100,
    )
    (result,) = body["results"]
    assert result["verdict"] == "output_limit"
    assert len(result["stdout"]) <= 100


# --- 4xx paths ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "needle"),
    [
        ({"code": 1, "tests": [{"expected_stdout": "1"}]}, "code"),
        ({"code": "print(1)", "tests": []}, "tests"),
        ({"code": "print(1)", "tests": [{"stdin": "1"}]}, "tests"),
        (
            {"code": "print(1)", "tests": [{"expected_stdout": "1"}], "limits": {"wall_s": -1}},
            "wall_s",
        ),
        ({"code": "print(1)", "tests": [{"expected_stdout": "1"}], "compare": "fuzzy"}, "compare"),
        ({"code": "x", "tests": [{"fn_name": "1bad", "expected": 1}]}, "tests"),
    ],
)
def test_invalid_requests_get_422_with_envelope(
    executor_client: TestClient, payload: dict[str, object], needle: str
) -> None:
    response = executor_client.post("/v1/execute", json=payload)
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_input"
    assert needle in error["message"] or any(needle in str(d["loc"]) for d in error["detail"])


def test_malformed_json_is_422(executor_client: TestClient) -> None:
    response = executor_client.post(
        "/v1/execute",
        content=b'{"code": "print(1)", "tests": [',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["error"]["type"] == "invalid_input"


def test_limit_above_server_maximum_is_422_naming_the_setting(executor_client: TestClient) -> None:
    response = executor_client.post(
        "/v1/execute",
        json={"code": "print(1)", "tests": [{"expected_stdout": "1"}], "limits": {"wall_s": 500}},
    )
    assert response.status_code == 422
    assert "COBALT_EXECUTOR_MAX_WALL_S" in response.json()["error"]["message"]


@pytest.fixture(scope="module")
def strict_client(
    executor_settings: ExecutorSettings, sandbox_pool: SandboxPool
) -> Iterator[TestClient]:
    """An executor with auth, a small body cap and a tiny queue, on the shared pool."""
    settings = ExecutorSettings(
        slots=executor_settings.slots, auth_token="s3cret", max_body_bytes=4096, max_pending_tests=3
    )
    with TestClient(create_app(settings, pool=sandbox_pool)) as client:
        yield client


AUTH = {"Authorization": "Bearer s3cret"}
ONE_TEST = {"code": "print(1)", "tests": [{"expected_stdout": "1"}]}


def test_auth_required_when_token_set(strict_client: TestClient) -> None:
    assert strict_client.post("/v1/execute", json=ONE_TEST).status_code == 401
    wrong = strict_client.post("/v1/execute", json=ONE_TEST, headers={"Authorization": "Bearer x"})
    assert wrong.status_code == 401
    assert wrong.json()["error"]["type"] == "unauthorized"
    assert strict_client.post("/run_code", json={"code": "print(1)"}).status_code == 401
    ok = strict_client.post("/v1/execute", json=ONE_TEST, headers=AUTH)
    assert ok.status_code == 200 and ok.json()["passed"] == 1
    # Probes stay open so orchestrators (Kubernetes) can check health without the token.
    assert strict_client.get("/healthz").status_code == 200
    assert wait_ready(strict_client)["status"] == "ready"


def test_oversized_body_is_413(strict_client: TestClient) -> None:
    payload = {"code": "#" + "x" * 10_000, "tests": [{"expected_stdout": ""}]}
    response = strict_client.post("/v1/execute", json=payload, headers=AUTH)
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "payload_too_large"

    def chunks() -> Iterator[bytes]:
        yield b'{"code": "'
        for _ in range(10):
            yield b"#" * 1000
        yield b'", "tests": [{"expected_stdout": ""}]}'

    streamed = strict_client.post(
        "/v1/execute", content=chunks(), headers={**AUTH, "content-type": "application/json"}
    )
    assert streamed.status_code == 413


def test_a_program_larger_than_the_queue_runs_alone_on_an_idle_server(
    strict_client: TestClient,
) -> None:
    # The queue holds 3 tests. Refusing 4 on an idle server would refuse them forever;
    # the 429 of a full queue is in test_integrity.py.
    payload = {"code": "print(1)", "tests": [{"expected_stdout": "1"}] * 4}
    response = strict_client.post("/v1/execute", json=payload, headers=AUTH)
    assert response.status_code == 200, response.text
    assert response.json()["passed"] == 4


# --- batch, info, metrics ---------------------------------------------------------------


def test_batch_results_keep_request_order(executor_client: TestClient) -> None:
    requests = [
        {
            "code": f"import time\ntime.sleep({0.3 if i % 3 == 0 else 0})\n"
            f"print({i} + int(input()))",
            "tests": [
                {"stdin": "1", "expected_stdout": str(i + 1)},
                {"stdin": "2", "expected_stdout": "0"},
            ],
        }
        for i in range(9)
    ]
    response = executor_client.post("/v1/execute/batch", json={"requests": requests})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert len(results) == 9
    for i, result in enumerate(results):
        assert verdicts(result) == ["accepted", "wrong_answer"]
        assert result["results"][0]["stdout"] == f"{i + 1}\n"


def test_info_reports_limits_and_capacity(executor_client: TestClient) -> None:
    info = executor_client.get("/v1/info").json()
    assert info["languages"][0] == "python"
    assert info["language_details"][0]["test_kinds"] == ["stdin", "call", "check"]
    assert set(info["compare_modes"]) == {"cobalt", "lines", "float", "lcb", "humaneval"}
    assert info["default_limits"]["wall_s"] == 4.0 and info["default_limits"]["memory_mb"] == 1024
    assert info["slots"] == 2
    assert info["sandbox"].startswith("bubblewrap")


def test_info_reports_each_maximum_and_the_setting_that_raises_it(
    executor_settings: ExecutorSettings, sandbox_pool: SandboxPool
) -> None:
    """What the orchestrator checks a run's limits against. A maximum above what a request
    may ask for at all (65,536 MiB) is still reported as set, not a 500."""
    settings = executor_settings.model_copy(update={"max_wall_s": 5.0, "max_memory_mb": 131072})
    with TestClient(create_app(settings, pool=sandbox_pool)) as client:
        info = client.get("/v1/info").json()
        refused = client.post(
            "/v1/execute",
            json={"code": "print(1)", "tests": [{"expected_stdout": "1"}],
                  "limits": {"wall_s": 5.5}},
        )  # fmt: skip
    assert info["max_limits"]["wall_s"] == 5.0 and info["max_limits"]["memory_mb"] == 131072
    assert info["limit_settings"]["wall_s"] == "COBALT_EXECUTOR_MAX_WALL_S"
    assert info["limit_settings"]["memory_mb"] == "COBALT_EXECUTOR_MAX_MEMORY_MB"
    assert refused.status_code == 422
    assert refused.json()["error"]["detail"] == {
        "field": "limits.wall_s", "value": 5.5, "maximum": 5.0,
        "setting": "COBALT_EXECUTOR_MAX_WALL_S",
    }  # fmt: skip


def test_metrics_count_verdicts(executor_client: TestClient) -> None:
    def accepted_count() -> float:
        text = executor_client.get("/metrics").text
        for line in text.splitlines():
            if line.startswith('cobalt_executor_verdicts_total{verdict="accepted"}'):
                return float(line.split()[-1])
        return 0.0

    before = accepted_count()
    execute(executor_client, "print(1)", [{"expected_stdout": "1"}] * 3)
    assert accepted_count() == before + 3
    text = executor_client.get("/metrics").text
    for name in (
        "cobalt_executor_queue_depth",
        "cobalt_executor_busy_slots",
        "cobalt_executor_test_seconds_bucket",
    ):
        assert name in text


def test_readyz_reports_the_cached_canary(executor_client: TestClient) -> None:
    assert wait_ready(executor_client)["state"] in ("ready", "busy")


def test_openapi_describes_the_bodies_parsed_off_the_event_loop(
    executor_client: TestClient,
) -> None:
    spec = executor_client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    body = spec["paths"]["/v1/execute"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/ExecuteRequest"}
    assert "expected" in schemas["CallTest"]["required"]
    referenced = set(re.findall(r"#/components/schemas/(\w+)", json.dumps(spec)))
    assert referenced <= set(schemas), referenced - set(schemas)


def test_openapi_is_built_once(
    executor_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # /openapi.json is anonymous: a flood of it must not generate the schemas each time.
    from cobalt.shared.contracts import ExecuteRequest

    first = executor_client.get("/openapi.json").json()
    calls: list[object] = []
    original = ExecuteRequest.model_json_schema

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return original(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ExecuteRequest, "model_json_schema", counted)
    for _ in range(3):
        assert executor_client.get("/openapi.json").json() == first
    assert calls == []
