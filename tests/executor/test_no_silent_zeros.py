"""No silent zeros: what `/run_code` answers where its clients would score a 0.

verl, tinker-cookbook and SkyRL score any 4xx (and every status but 504) as a failed
program. So a full queue holds the request and then answers 504, which they retry; every
4xx is logged with its reason and counted by kind in `/metrics`; SandboxFusion's timeouts
are refused naming its own field; the token can travel in the path (`/t/<token>/`), since
no SandboxFusion client sends a header; and a client given the base URL is told where to
post.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cobalt.executor.api.client_errors import redact_path
from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings
from tests.executor.helpers import fill_one_test_queue
from tests.support.serving import serve_executor

TOKEN = "path-token-s3cret"


def client_errors(client: httpx.Client | TestClient) -> dict[tuple[str, str, str], float]:
    """`cobalt_executor_client_errors_total` by (route, status, type)."""
    counts = {}
    pattern = re.compile(
        r'^cobalt_executor_client_errors_total\{route="([^"]*)",status="(\d+)",type="([^"]*)"\} '
        r"(\S+)$",
        re.MULTILINE,
    )
    for route, status, kind, value in pattern.findall(client.get("/metrics").text):
        counts[(route, status, kind)] = float(value)
    return counts


# --- overload: held, then 504 ----------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_queue_url(sandbox_pool: SandboxPool) -> Iterator[str]:
    """An executor whose queue holds one test and whose `/run_code` holds a request 1.5 s."""
    settings = ExecutorSettings(
        slots=sandbox_pool.config.slots, max_pending_tests=1, run_code_queue_wait_s=1.5
    )
    with serve_executor(settings, sandbox_pool) as url:
        yield url


def test_a_full_queue_holds_run_code_then_runs_it(tiny_queue_url: str) -> None:
    filler = fill_one_test_queue(tiny_queue_url, 0.5)
    started = time.monotonic()
    response = httpx.post(f"{tiny_queue_url}/run_code", json={"code": "print(6 * 7)"}, timeout=30)
    filler.join()
    assert response.status_code == 200, response.text
    assert response.json()["run_result"]["stdout"] == "42\n"
    assert time.monotonic() - started >= 0.2  # it waited for the filler, not refused


def test_a_queue_full_past_the_hold_is_a_504_with_retry_after(tiny_queue_url: str) -> None:
    filler = fill_one_test_queue(tiny_queue_url, 2.5)
    started = time.monotonic()
    response = httpx.post(f"{tiny_queue_url}/run_code", json={"code": "print(1)"}, timeout=30)
    waited = time.monotonic() - started
    # /v1 keeps its immediate 429 (Cobalt's own clients honour Retry-After).
    v1 = httpx.post(
        f"{tiny_queue_url}/v1/execute",
        json={"code": "print(1)", "tests": [{"expected_stdout": "1"}]},
        timeout=30,
    )
    filler.join()
    assert response.status_code == 504, response.text
    assert response.json()["error"]["type"] == "queue_timeout"
    assert "COBALT_EXECUTOR_RUN_CODE_QUEUE_WAIT_S" in response.json()["error"]["message"]
    assert int(response.headers["Retry-After"]) >= 1
    assert 1.4 <= waited < 3.5
    assert v1.status_code == 429


# --- SandboxFusion's timeouts, in its field names ------------------------------------------


@pytest.mark.parametrize("field", ["run_timeout", "compile_timeout"])
def test_a_timeout_above_the_maximum_is_refused_naming_the_clients_field(
    executor_client: TestClient, field: str
) -> None:
    response = executor_client.post("/run_code", json={"code": "print(1)", field: 75})
    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["type"] == "limit_too_high"
    assert error["message"].startswith(f"{field} is 75, above the executor's maximum of 60")
    assert "COBALT_EXECUTOR_MAX_WALL_S" in error["message"]
    assert error["detail"]["field"] == field


def test_timeouts_above_60_s_run_where_the_deployment_allows_them(
    sandbox_pool: SandboxPool,
) -> None:
    settings = ExecutorSettings(slots=sandbox_pool.config.slots, max_wall_s=300)
    with TestClient(create_app(settings, pool=sandbox_pool)) as client:
        body = {"code": "print(2)", "run_timeout": 120, "compile_timeout": 120}
        response = client.post("/run_code", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "Success"


# --- the token in the path -----------------------------------------------------------------


@pytest.fixture(scope="module")
def guarded_client(sandbox_pool: SandboxPool) -> Iterator[TestClient]:
    settings = ExecutorSettings(slots=sandbox_pool.config.slots, auth_token=TOKEN)
    with TestClient(create_app(settings, pool=sandbox_pool)) as client:
        yield client


def test_the_token_in_the_path_opens_run_code(guarded_client: TestClient) -> None:
    response = guarded_client.post(f"/t/{TOKEN}/run_code", json={"code": "print(5)"})
    assert response.status_code == 200, response.text
    assert response.json()["run_result"]["stdout"] == "5\n"
    assert guarded_client.get(f"/t/{TOKEN}/v1/ping").json() == "pong"
    scalebox = {
        "completion": "```python\nprint(int(input()) + 1)\n```",
        "config": {
            "language": "python",
            "provided_data": {"test_cases": {"input": ["1"], "output": ["2"]}},
        },
    }
    batch = guarded_client.post(f"/t/{TOKEN}/common_evaluate_batch", json=scalebox)
    assert batch.status_code == 200 and batch.json()["accepted"] is True, batch.text
    assert guarded_client.post("/common_evaluate_batch", json=scalebox).status_code == 401


@pytest.mark.parametrize("path", ["/t/wrong/run_code", "/t//run_code", "/run_code"])
def test_run_code_without_the_right_token_is_a_401(guarded_client: TestClient, path: str) -> None:
    response = guarded_client.post(path, json={"code": "print(5)"})
    assert response.status_code in (401, 404), response.text
    if path != "/t//run_code":  # an empty path segment matches no route
        assert response.status_code == 401
        assert "COBALT_EXECUTOR_AUTH_TOKEN" in response.json()["error"]["message"]


def test_the_path_token_never_reaches_the_log_or_the_metrics(
    guarded_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="cobalt.executor.api.client_errors"):
        guarded_client.post("/t/not-the-token-xyz/run_code", json={"code": "1"})
        guarded_client.post("/t/not-the-token-xyz/no-such-route", json={})
    assert "not-the-token-xyz" not in caplog.text
    assert "not-the-token-xyz" not in guarded_client.get("/metrics").text
    assert "/t/{token}/run_code" in caplog.text and "unrouted /t/***/no-such-route" in caplog.text
    assert redact_path(f"/t/{TOKEN}/run_code") == "/t/***/run_code"


def test_uvicorns_access_log_hides_the_path_token(
    guarded_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    # uvicorn logs each request as (client, method, path, version, status).
    access = logging.getLogger("uvicorn.access")
    with caplog.at_level(logging.INFO, logger="uvicorn.access"):
        access.info(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:1", "POST", f"/t/{TOKEN}/run_code", "1.1", 200
        )
    assert TOKEN not in caplog.text and "/t/***/run_code" in caplog.text


@settings(max_examples=40, deadline=None, derandomize=True)
@given(token=st.text(min_size=1, max_size=40).filter(lambda t: t != TOKEN))
def test_no_other_path_token_opens_run_code(guarded_client: TestClient, token: str) -> None:
    # Never runs the program: 401, or 404 where the token's characters make another path.
    path = f"/t/{quote(token, safe='')}/run_code"
    response = guarded_client.post(path, json={"code": "print('opened')"})
    assert response.status_code in (401, 404), (token, response.text)


def test_ping_is_open(guarded_client: TestClient) -> None:
    assert guarded_client.get("/v1/ping").json() == "pong"


# --- the base URL, and every 4xx logged and counted ------------------------------------------


@pytest.mark.parametrize("path", ["/", f"/t/{TOKEN}/"])
def test_posting_to_the_base_url_says_where_to_post(guarded_client: TestClient, path: str) -> None:
    response = guarded_client.post(path, json={"code": "print(1)"})
    assert response.status_code == 404
    assert "<base>/run_code" in response.json()["error"]["message"]


def test_each_4xx_is_logged_with_its_reason_and_counted_by_kind(
    executor_client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    before = client_errors(executor_client)
    with caplog.at_level(logging.INFO, logger="cobalt.executor.api.client_errors"):
        unsupported = executor_client.post("/run_code", json={"code": "x", "language": "cobol"})
        too_long = executor_client.post("/run_code", json={"code": "x", "run_timeout": 61})
    assert unsupported.status_code == too_long.status_code == 422
    after = client_errors(executor_client)
    for kind in ("unsupported", "limit_too_high"):
        key = ("/run_code", "422", kind)
        assert after.get(key, 0) == before.get(key, 0) + 1, (key, after)
    assert "refused POST /run_code -> 422 unsupported: language 'cobol'" in caplog.text
    assert "refused POST /run_code -> 422 limit_too_high: run_timeout is 61" in caplog.text


def test_a_body_refused_by_the_guard_is_counted_too(sandbox_pool: SandboxPool) -> None:
    # The body guard answers 413 itself, before any route: the count sits outside it.
    settings = ExecutorSettings(slots=sandbox_pool.config.slots, max_body_bytes=1024)
    with TestClient(create_app(settings, pool=sandbox_pool)) as client:
        response = client.post("/run_code", content=b'{"code": "' + b"x" * 4000 + b'"}')
        assert response.status_code == 413
        assert client_errors(client) == {("unrouted", "413", "payload_too_large"): 1.0}


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=6,
)
RUN_CODE_FIELDS = [
    "code",
    "language",
    "stdin",
    "run_timeout",
    "compile_timeout",
    "files",
    "memory_limit_MB",
]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    derandomize=True,
)
@given(
    path=st.sampled_from(["/run_code", "/", "/nope", "/v1/execute", "/t/x/run_code", "/v1/ping"]),
    body=st.dictionaries(st.sampled_from(RUN_CODE_FIELDS), JSON_VALUES, max_size=4),
)
def test_every_4xx_of_any_request_is_counted_once_and_logged(
    executor_client: TestClient, path: str, body: dict[str, object]
) -> None:
    # A body without code gets 422 before it runs anything; the fuzz never runs programs.
    body.pop("code", None)
    before = sum(client_errors(executor_client).values())
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("cobalt.executor.api.client_errors")
    logger.addHandler(handler)
    previous = logger.level
    logger.setLevel(logging.INFO)
    try:
        response = executor_client.post(path, content=json.dumps(body))
    finally:
        logger.removeHandler(handler)
        logger.setLevel(previous)
    assert response.status_code < 500, response.text
    counted = sum(client_errors(executor_client).values()) - before
    if 400 <= response.status_code < 500:
        assert counted == 1
        assert len(records) == 1 and str(response.status_code) in records[0].getMessage()
        assert response.json()["error"]["message"] in records[0].getMessage()
    else:
        assert counted == 0 and not records
