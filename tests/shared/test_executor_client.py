"""The executor clients: retries, error mapping and auth on a mock transport, then a real app."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import httpx
import pytest

import cobalt.shared.clients as clients_package
from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.clients import AsyncExecutorClient, ExecutorClient, ExecutorClientSettings
from cobalt.shared.clients.base import DEFAULT_BACKOFF_S, MAX_RETRY_AFTER_S, RetryPolicy
from cobalt.shared.contracts import (
    BatchExecuteRequest,
    BatchExecuteResponse,
    ExecuteRequest,
    ExecuteResponse,
    Limits,
    RunCodeRequest,
    StdinTest,
    TestResult,
    Verdict,
)
from cobalt.shared.errors import (
    CobaltError,
    Conflict,
    InvalidInput,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    Unauthorized,
    Unavailable,
    UpstreamError,
)
from tests.support.serving import serve_executor

BASE_URL = "http://executor.test"
TOKEN = "s3cret-token"
REQUEST = ExecuteRequest(code="print(42)", tests=[StdinTest(expected_stdout="42")])
RESPONSE = ExecuteResponse(
    results=[TestResult(verdict=Verdict.ACCEPTED, feedback="Passed.")],
    passed=1,
    total=1,
    pass_rate=1.0,
    executor_version="cobalt-executor/test",
)

Reply = httpx.Response | Exception


class Script:
    """A MockTransport handler: answers from a list, in order, and records every request."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


def ok(model: Any = RESPONSE) -> httpx.Response:
    return httpx.Response(200, content=model.model_dump_json().encode())


def envelope(
    status: int,
    message: str = "something is wrong",
    *,
    error_type: str = "error",
    detail: Any = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    body = {"error": {"type": error_type, "message": message, "detail": detail}}
    return httpx.Response(status, json=body, headers=headers)


def _retry(kwargs: dict[str, Any]) -> dict[str, Any]:
    if "max_retries" in kwargs:
        kwargs["retry"] = RetryPolicy(max_retries=kwargs.pop("max_retries"))
    return kwargs


def sync_client(script: Script, **kwargs: Any) -> tuple[ExecutorClient, list[float]]:
    sleeps: list[float] = []
    kwargs = _retry(kwargs)
    client = ExecutorClient(
        base_url=BASE_URL, transport=httpx.MockTransport(script), sleep=sleeps.append, **kwargs
    )
    return client, sleeps


def async_client(script: Script, **kwargs: Any) -> tuple[AsyncExecutorClient, list[float]]:
    sleeps: list[float] = []
    kwargs = _retry(kwargs)

    async def sleep(delay: float) -> None:
        sleeps.append(delay)

    client = AsyncExecutorClient(
        base_url=BASE_URL, transport=httpx.MockTransport(script), sleep=sleep, **kwargs
    )
    return client, sleeps


# --- requests and parsing ---------------------------------------------------------------


def test_execute_posts_the_contract_and_parses_the_response() -> None:
    script = Script(ok())
    client, sleeps = sync_client(script)

    assert client.execute(REQUEST) == RESPONSE

    (sent,) = script.requests
    assert (sent.method, sent.url.path) == ("POST", "/v1/execute")
    assert sent.headers["content-type"] == "application/json"
    assert ExecuteRequest.model_validate_json(sent.content) == REQUEST
    assert sleeps == []


def test_every_endpoint_has_its_method_and_path() -> None:
    batch = BatchExecuteResponse(results=[RESPONSE, RESPONSE])
    script = Script(
        ok(batch),
        httpx.Response(200, json={"status": "Success", "message": ""}),
        httpx.Response(200, text="# metrics\n"),
        httpx.Response(200, json={"status": "ok"}),
        httpx.Response(200, json={"status": "ready"}),
    )
    client, _ = sync_client(script)

    assert client.execute_batch(BatchExecuteRequest(requests=[REQUEST, REQUEST])) == batch
    assert client.run_code(RunCodeRequest(code="print(1)")).status == "Success"
    assert client.metrics() == "# metrics\n"
    assert client.health() is True
    assert client.ready() is True
    assert [(r.method, r.url.path) for r in script.requests] == [
        ("POST", "/v1/execute/batch"),
        ("POST", "/run_code"),
        ("GET", "/metrics"),
        ("GET", "/healthz"),
        ("GET", "/readyz"),
    ]


def test_a_base_url_path_prefix_is_kept() -> None:
    script = Script(ok())
    sleeps: list[float] = []
    client = ExecutorClient(
        base_url=f"{BASE_URL}/executor/",
        transport=httpx.MockTransport(script),
        sleep=sleeps.append,
    )
    client.execute(REQUEST)
    assert script.requests[0].url.path == "/executor/v1/execute"


def test_a_body_that_is_not_the_contract_is_an_upstream_error() -> None:
    client, _ = sync_client(Script(httpx.Response(200, json={"unexpected": True})))
    with pytest.raises(UpstreamError, match="not a valid ExecuteResponse") as caught:
        client.execute(REQUEST)
    assert caught.value.upstream_status == 200


# --- auth -------------------------------------------------------------------------------


def test_the_token_is_sent_as_a_bearer_header() -> None:
    script = Script(ok(), httpx.Response(200, json={"status": "ok"}))
    client, _ = sync_client(script, token=TOKEN)
    client.execute(REQUEST)
    client.health()
    assert [r.headers["authorization"] for r in script.requests] == [f"Bearer {TOKEN}"] * 2


def test_the_token_is_sent_through_an_injected_client_too() -> None:
    script = Script(ok())
    with httpx.Client(base_url=BASE_URL, transport=httpx.MockTransport(script)) as http:
        ExecutorClient(client=http, token=TOKEN).execute(REQUEST)
    assert script.requests[0].headers["authorization"] == f"Bearer {TOKEN}"


def test_no_token_means_no_authorization_header() -> None:
    script = Script(ok())
    client, _ = sync_client(script)
    client.execute(REQUEST)
    assert "authorization" not in script.requests[0].headers


# --- retries ----------------------------------------------------------------------------


@pytest.mark.parametrize("status", [502, 503, 504])
def test_gateway_and_unavailable_statuses_are_retried(status: int) -> None:
    script = Script(envelope(status), ok())
    client, sleeps = sync_client(script)

    assert client.execute(REQUEST) == RESPONSE

    assert len(script.requests) == 2
    assert len(sleeps) == 1
    assert DEFAULT_BACKOFF_S / 2 <= sleeps[0] <= DEFAULT_BACKOFF_S


def test_429_waits_as_long_as_retry_after_says() -> None:
    script = Script(envelope(429, headers={"Retry-After": "7"}), ok())
    client, sleeps = sync_client(script)

    assert client.execute(REQUEST) == RESPONSE
    assert sleeps == [7.0]


def test_retry_after_is_capped() -> None:
    client, sleeps = sync_client(Script(envelope(429, headers={"Retry-After": "86400"}), ok()))
    client.execute(REQUEST)
    assert sleeps == [MAX_RETRY_AFTER_S]


def test_429_without_retry_after_backs_off() -> None:
    client, sleeps = sync_client(Script(envelope(429), ok()))
    client.execute(REQUEST)
    assert len(sleeps) == 1
    assert 0 < sleeps[0] <= DEFAULT_BACKOFF_S


@pytest.mark.parametrize(
    "error",
    [
        httpx.ConnectError("connection refused"),
        httpx.ReadTimeout("timed out"),
        httpx.RemoteProtocolError("server disconnected"),
    ],
)
def test_transport_errors_are_retried(error: Exception) -> None:
    script = Script(error, ok())
    client, sleeps = sync_client(script)
    assert client.execute(REQUEST) == RESPONSE
    assert len(script.requests) == 2
    assert len(sleeps) == 1


def test_422_is_not_retried() -> None:
    script = Script(envelope(422, "tests.0.expected_stdout: Field required"), ok())
    client, sleeps = sync_client(script)

    with pytest.raises(InvalidInput, match="expected_stdout: Field required"):
        client.execute(REQUEST)

    assert len(script.requests) == 1
    assert sleeps == []


def test_500_is_not_retried() -> None:
    script = Script(envelope(500, "internal server error; see the server log"), ok())
    client, sleeps = sync_client(script)
    with pytest.raises(UpstreamError) as caught:
        client.execute(REQUEST)
    assert caught.value.upstream_status == 500
    assert len(script.requests) == 1
    assert sleeps == []


def test_max_retries_zero_tries_once() -> None:
    script = Script(envelope(503), ok())
    client, sleeps = sync_client(script, max_retries=0)
    with pytest.raises(Unavailable):
        client.execute(REQUEST)
    assert len(script.requests) == 1
    assert sleeps == []


# --- errors after retries -----------------------------------------------------------------


def test_transport_errors_after_every_retry_are_unavailable() -> None:
    script = Script(*[httpx.ConnectError("connection refused")] * 3)
    client, sleeps = sync_client(script, max_retries=2)

    with pytest.raises(Unavailable) as caught:
        client.execute(REQUEST)

    assert len(script.requests) == 3
    assert len(sleeps) == 2
    message = str(caught.value)
    assert f"{BASE_URL}/v1/execute" in message
    assert "3 attempts" in message
    assert "COBALT_EXECUTOR_URL" in message
    assert isinstance(caught.value.__cause__, httpx.ConnectError)


def test_a_transport_error_that_cannot_pass_is_not_retried() -> None:
    script = Script(httpx.UnsupportedProtocol("unsupported protocol"), ok())
    client, sleeps = sync_client(script)
    with pytest.raises(Unavailable):
        client.execute(REQUEST)
    assert len(script.requests) == 1
    assert sleeps == []


def test_503_after_every_retry_is_unavailable_with_the_servers_message() -> None:
    script = Script(*[envelope(503, "canary program did not pass")] * 5)
    client, sleeps = sync_client(script)

    with pytest.raises(Unavailable, match="canary program did not pass") as caught:
        client.execute(REQUEST)

    assert len(script.requests) == 5
    assert len(sleeps) == 4
    assert isinstance(caught.value.__cause__, httpx.HTTPStatusError)


def test_429_after_every_retry_is_overloaded_with_retry_after() -> None:
    script = Script(*[envelope(429, "queue is full", headers={"Retry-After": "2"})] * 3)
    client, sleeps = sync_client(script, max_retries=2)

    with pytest.raises(Overloaded, match="queue is full") as caught:
        client.execute(REQUEST)

    assert caught.value.retry_after_s == 2.0
    assert sleeps == [2.0, 2.0]


@pytest.mark.parametrize(
    ("status", "error_class"),
    [
        (400, InvalidInput),
        (401, Unauthorized),
        (404, NotFound),
        (409, Conflict),
        (413, PayloadTooLarge),
        (422, InvalidInput),
    ],
)
def test_4xx_maps_to_the_matching_error(status: int, error_class: type[CobaltError]) -> None:
    detail = {"field": "limits.wall_s"}
    script = Script(envelope(status, "the server's own words", detail=detail))
    client, sleeps = sync_client(script)

    with pytest.raises(error_class, match="the server's own words") as caught:
        client.execute(REQUEST)

    assert type(caught.value) is error_class
    assert caught.value.detail == detail
    assert isinstance(caught.value.__cause__, httpx.HTTPStatusError)
    assert sleeps == []


def test_an_unexpected_4xx_is_an_upstream_error() -> None:
    client, _ = sync_client(Script(envelope(405, "Method Not Allowed")))
    with pytest.raises(UpstreamError) as caught:
        client.execute(REQUEST)
    assert caught.value.upstream_status == 405


def test_a_body_that_is_not_an_envelope_is_quoted() -> None:
    script = Script(*[httpx.Response(502, text="<html>Bad Gateway</html>")] * 2)
    client, _ = sync_client(script, max_retries=1)
    with pytest.raises(UpstreamError, match="Bad Gateway") as caught:
        client.execute(REQUEST)
    assert caught.value.upstream_status == 502


# --- probes -------------------------------------------------------------------------------


def test_probes_say_false_at_once_instead_of_raising() -> None:
    script = Script(
        envelope(503, "canary program did not pass"),
        httpx.ConnectError("connection refused"),
    )
    client, sleeps = sync_client(script)
    assert client.ready() is False
    assert client.health() is False
    assert sleeps == []


# --- construction and lifetime --------------------------------------------------------------


def test_constructor_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="base_url"):
        ExecutorClient()
    with httpx.Client() as http, pytest.raises(ValueError, match="not both"):
        ExecutorClient(client=http, base_url=BASE_URL)
    with pytest.raises(ValueError, match="http://"):
        ExecutorClient(base_url="executor:8100")
    with pytest.raises(ValueError, match="max_retries"):
        ExecutorClient(base_url=BASE_URL, retry=RetryPolicy(max_retries=-1))


def test_close_closes_only_a_client_it_built() -> None:
    with httpx.Client(base_url=BASE_URL) as http:
        with ExecutorClient(client=http):
            pass
        assert not http.is_closed

    with ExecutorClient(base_url=BASE_URL) as built:
        inner = built._client
    assert inner.is_closed


def test_from_settings_uses_url_token_and_retries() -> None:
    settings = ExecutorClientSettings(url=BASE_URL, auth_token=TOKEN, client_max_retries=1)
    script = Script(envelope(503), envelope(503))
    sleeps: list[float] = []
    client = ExecutorClient.from_settings(
        settings, transport=httpx.MockTransport(script), sleep=sleeps.append
    )

    with pytest.raises(Unavailable):
        client.execute(REQUEST)

    assert len(script.requests) == 2
    assert script.requests[0].headers["authorization"] == f"Bearer {TOKEN}"
    assert client.base_url.startswith(BASE_URL)


def test_from_settings_needs_a_url() -> None:
    with pytest.raises(ValueError, match="COBALT_EXECUTOR_URL"):
        ExecutorClient.from_settings(ExecutorClientSettings(url=None))


def test_public_surface_is_explicit_and_sorted() -> None:
    assert clients_package.__all__ == sorted(clients_package.__all__)
    for name in clients_package.__all__:
        assert hasattr(clients_package, name)


# --- the async client -----------------------------------------------------------------------


def test_async_client_retries_and_honours_retry_after() -> None:
    script = Script(
        httpx.ConnectError("connection refused"),
        envelope(429, headers={"Retry-After": "3"}),
        ok(),
    )

    async def scenario() -> ExecuteResponse:
        client, sleeps = async_client(script, token=TOKEN)
        async with client:
            response = await client.execute(REQUEST)
        assert len(sleeps) == 2
        assert sleeps[1] == 3.0
        return response

    assert asyncio.run(scenario()) == RESPONSE
    assert len(script.requests) == 3
    assert all(r.headers["authorization"] == f"Bearer {TOKEN}" for r in script.requests)


def test_async_client_maps_errors() -> None:
    script = Script(
        envelope(422, "limits.wall_s is too high"),
        *[httpx.ReadTimeout("timed out")] * 2,
        envelope(401, "missing or wrong bearer token"),
    )

    async def scenario() -> None:
        client, sleeps = async_client(script, max_retries=1)
        with pytest.raises(InvalidInput, match="wall_s is too high"):
            await client.execute(REQUEST)
        with pytest.raises(Unavailable, match=BASE_URL):
            await client.info()
        with pytest.raises(Unauthorized):
            await client.run_code(RunCodeRequest(code="print(1)"))
        assert len(sleeps) == 1
        await client.close()

    asyncio.run(scenario())
    assert len(script.requests) == 4


def test_async_probes() -> None:
    script = Script(httpx.Response(200, json={"status": "ok"}), httpx.ConnectError("refused"))

    async def scenario() -> tuple[bool, bool]:
        async with async_client(script)[0] as client:
            return await client.health(), await client.ready()

    assert asyncio.run(scenario()) == (True, False)


# --- against the real executor app ------------------------------------------------------------

DOUBLE = "print(int(input()) * 2)"


def test_sync_client_against_the_real_app(executor_url: str) -> None:
    request = ExecuteRequest(
        code=DOUBLE,
        tests=[
            StdinTest(stdin="21", expected_stdout="42"),
            StdinTest(stdin="2", expected_stdout="5"),
        ],
    )
    with ExecutorClient(base_url=executor_url) as client:
        response = client.execute(request)
        assert [r.verdict for r in response.results] == [Verdict.ACCEPTED, Verdict.WRONG_ANSWER]
        assert (response.passed, response.total) == (1, 2)
        batch = client.execute_batch(BatchExecuteRequest(requests=[request, request]))
        assert [r.passed for r in batch.results] == [1, 1]
        run = client.run_code(RunCodeRequest(code=DOUBLE, stdin="4"))
        assert run.run_result is not None and run.run_result.stdout == "8\n"
        # Python always; the other languages are those whose toolchains this host has.
        assert client.info().languages[0] == "python"
        assert client.health() is True
        assert client.ready() is True


def test_real_app_refusals_map_to_invalid_input(executor_url: str) -> None:
    too_long = ExecuteRequest(
        code=DOUBLE, tests=[StdinTest(expected_stdout="")], limits=Limits(wall_s=600)
    )
    with ExecutorClient(base_url=executor_url) as client:
        with pytest.raises(InvalidInput, match="COBALT_EXECUTOR_MAX_WALL_S") as caught:
            client.execute(too_long)
    assert caught.value.detail["field"] == "limits.wall_s"


def test_real_app_with_auth(sandbox_pool: SandboxPool) -> None:
    settings = ExecutorSettings(slots=2, auth_token=TOKEN)
    request = ExecuteRequest(code=DOUBLE, tests=[StdinTest(stdin="1", expected_stdout="2")])
    with serve_executor(settings, sandbox_pool) as url:
        with ExecutorClient(base_url=url) as anonymous:
            with pytest.raises(Unauthorized, match="bearer token"):
                anonymous.execute(request)
        with ExecutorClient(base_url=url, token="wrong") as wrong:
            with pytest.raises(Unauthorized):
                wrong.info()
        with ExecutorClient(base_url=url, token=TOKEN) as right:
            assert right.execute(request).passed == 1


def test_real_app_overload_is_retried_after_retry_after(sandbox_pool: SandboxPool) -> None:
    settings = ExecutorSettings(slots=2, max_pending_tests=1)
    request = ExecuteRequest(code=DOUBLE, tests=[StdinTest(expected_stdout="")] * 2)
    # A request holding the whole queue (one test) while the client tries.
    filler = {"code": "import time\ntime.sleep(3)", "tests": [{"expected_stdout": ""}]}
    sleeps: list[float] = []
    with serve_executor(settings, sandbox_pool) as url:
        holder = threading.Thread(
            target=httpx.post, args=(f"{url}/v1/execute",), kwargs={"json": filler, "timeout": 60}
        )
        holder.start()
        while "cobalt_executor_pending_tests 1.0" not in httpx.get(f"{url}/metrics").text:
            time.sleep(0.02)
        with ExecutorClient(
            base_url=url, retry=RetryPolicy(max_retries=2), sleep=sleeps.append
        ) as client:
            with pytest.raises(Overloaded, match="queue is full") as caught:
                client.execute(request)
        holder.join()
    assert sleeps == [1.0, 1.0]
    assert caught.value.retry_after_s == 1.0


def test_async_client_against_the_real_app(
    executor_settings: ExecutorSettings, sandbox_pool: SandboxPool
) -> None:
    app = create_app(executor_settings, pool=sandbox_pool)
    request = ExecuteRequest(code=DOUBLE, tests=[StdinTest(stdin="5", expected_stdout="10")])

    async def scenario() -> tuple[ExecuteResponse, bool]:
        # ASGITransport does not run the lifespan, which builds the service: run it here.
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with AsyncExecutorClient(base_url=BASE_URL, transport=transport) as client:
                response = await client.execute(request)
                ready = await client.ready()
            wrong_prefix = AsyncExecutorClient(
                base_url=f"{BASE_URL}/not-the-executor", transport=httpx.ASGITransport(app=app)
            )
            async with wrong_prefix:
                with pytest.raises(NotFound, match="not-the-executor"):
                    await wrong_prefix.execute(request)
        return response, ready

    response, ready = asyncio.run(scenario())
    assert [r.verdict for r in response.results] == [Verdict.ACCEPTED]
    assert ready is True
