"""Request bodies on every route: generated deep nesting anywhere is a 4xx at bounded
cost, the commonest test-shape mistakes get errors that name the fix, the API documents
are served offline, and a bad setting stops `serve` with one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings
from cobalt.orchestrator.api.app import create_app as create_orchestrator_app
from cobalt.orchestrator.settings import OrchestratorSettings

ROUTES = ["/v1/execute", "/v1/execute/batch", "/run_code"]

PLACES = [
    '{"code": "P", "tests": [{"stdin": "", "expected_stdout": ""}], "unknown": V}',
    '{"code": "P", "tests": [{"stdin": V, "expected_stdout": ""}]}',
    '{"code": "P", "tests": [{"fn_name": "f", "args": [V], "expected": 1}]}',
    '{"code": "P", "tests": [{"fn_name": "f", "kwargs": {"a": V}, "expected": V}]}',
    '{"code": "P", "tests": [{"stdin": "", "expected_stdout": ""}], "limits": V}',
    '{"code": V, "tests": [{"stdin": "", "expected_stdout": ""}]}',
    '{"requests": [V]}',
    '{"requests": [{"code": "P", "tests": [{"stdin": "", "expected_stdout": "", "x": V}]}]}',
    '{"code": "P", "files": {"a": V}}',
    '{"code": "P", "stdin": V, "unknown": V}',
    "V",
]
"""Where a deep value goes: unknown fields, typed fields, values the program receives."""


def _nested(depth: int, kind: str) -> str:
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"k":' * depth + "1" + "}" * depth


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
@given(
    route=st.sampled_from(ROUTES),
    place=st.sampled_from(PLACES),
    depth=st.sampled_from([1, 30, 65, 900, 5_000, 200_000]),
    kind=st.sampled_from(["list", "object"]),
    # Parsed inline, on a thread, and in the parser processes (over 1 MiB).
    padding=st.sampled_from([0, 80 << 10, 1100 << 10]),
)
def test_deep_nesting_anywhere_in_any_body_is_never_a_server_error(
    executor_client: TestClient, route: str, place: str, depth: int, kind: str, padding: int
) -> None:
    body = place.replace("V", _nested(depth, kind)).replace("P", "#" * padding)
    response = executor_client.post(
        route, content=body.encode(), headers={"content-type": "application/json"}
    )
    assert response.status_code < 500, (route, place[:60], depth, kind, response.text[:300])
    if response.status_code >= 400:
        error = response.json()["error"]
        assert error["type"] and error["message"]
        assert len(response.content) < 20_000  # errors without the input they refused


def _first_error(client: TestClient, route: str, body: dict[str, object]) -> str:
    response = client.post(route, json=body)
    assert response.status_code == 422, response.text
    message: str = response.json()["error"]["message"]
    return message


@pytest.mark.parametrize("batch", [False, True])
def test_a_call_test_without_expected_is_told_to_add_it(
    executor_client: TestClient, batch: bool
) -> None:
    one = {"code": "def f(x): return x", "tests": [{"fn_name": "f", "args": [1]}]}
    route, body = ("/v1/execute/batch", {"requests": [one]}) if batch else ("/v1/execute", one)
    message = _first_error(executor_client, route, body)
    assert "tests.0.call" in message and '"expected"' in message
    assert "expected_stdout" not in message and "StdinTest" not in message
    assert "function-after" not in message  # no pydantic internals


def test_taco_style_input_and_output_are_told_their_names(executor_client: TestClient) -> None:
    body = {"code": "print(input())", "tests": [{"input": "1\n", "output": "1\n"}]}
    message = _first_error(executor_client, "/v1/execute", body)
    assert "rename 'input' to 'stdin'" in message and "'output' to 'expected_stdout'" in message
    assert "Field required" not in message


def test_a_stdin_test_missing_its_expected_output_names_that_field(
    executor_client: TestClient,
) -> None:
    body = {"code": "print(1)", "tests": [{"stdin": "1"}]}
    message = _first_error(executor_client, "/v1/execute", body)
    assert message.startswith("tests.0.stdin.expected_stdout: Field required")


def _assert_served_offline(client: TestClient) -> None:
    for page, asset in [("/docs", "swagger-ui-bundle.js"), ("/redoc", "redoc.standalone.js")]:
        html = client.get(page)
        assert html.status_code == 200
        assert f"/docs-assets/{asset}" in html.text
        assert "https://" not in html.text and "http://" not in html.text  # no CDN, no fonts
        script = client.get(f"/docs-assets/{asset}")
        assert script.status_code == 200 and len(script.content) > 500_000
    assert client.get("/docs-assets/swagger-ui.css").status_code == 200


def test_executor_docs_work_offline_and_the_document_is_built_once(
    executor_settings: ExecutorSettings, sandbox_pool: SandboxPool
) -> None:
    app = create_app(executor_settings, pool=sandbox_pool)
    build = app.openapi
    builds = []

    def counted() -> dict[str, object]:
        builds.append(1)
        return build()

    app.openapi = counted  # type: ignore[method-assign]
    with TestClient(app) as client:
        _assert_served_offline(client)
        documents = [client.get("/openapi.json") for _ in range(3)]
    assert {d.status_code for d in documents} == {200}
    assert documents[0].content == documents[2].content
    assert len(builds) == 1
    spec = documents[0].json()
    run_code = spec["paths"]["/run_code"]["post"]
    assert run_code["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/RunCodeRequest"
    )
    fields = spec["components"]["schemas"]["RunCodeRequest"]["properties"]
    assert all(field.get("description") for field in fields.values()), fields
    assert spec["components"]["schemas"]["RunCodeRequest"]["examples"]


def test_orchestrator_docs_work_offline(tmp_path: Path) -> None:
    app = create_orchestrator_app(OrchestratorSettings(database_url=f"sqlite:///{tmp_path}/x.db"))
    with TestClient(app) as client:
        _assert_served_offline(client)
        spec = client.get("/openapi.json").json()
    assert "/v1/runs" in spec["paths"]


_BOOT = (
    "import sys; sys.argv = ['cobalt', *sys.argv[1:]]; "
    "from cobalt.shared.commands import main; main()"
)


@pytest.mark.parametrize(
    ("command", "variable", "value"),
    [
        (["executor", "serve"], "COBALT_EXECUTOR_SLOTS", "many"),
        (["executor", "serve"], "COBALT_EXECUTOR_BODY_DEADLINE_S", "-1"),
        (["orchestrator", "serve"], "COBALT_ORCHESTRATOR_BODY_DEADLINE_S", "soon"),
    ],
)
def test_serve_with_a_bad_setting_says_so_in_one_line(
    command: list[str], variable: str, value: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    done = subprocess.run(
        [sys.executable, "-c", _BOOT, *command],
        env={**env, variable: value},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: bad"), done.stderr[-2000:]
    assert variable.rsplit("_", 3)[-1].lower() in lines[0].lower() or "deadline" in lines[0]
    assert "Traceback" not in done.stderr
