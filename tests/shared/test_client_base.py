"""One retry policy and one error mapping for every client, over real TCP connections.

Each client (executor, inference control, orchestrator's training API) is pointed at a
scripted HTTP server, so attempts are counted on the server's side; `sleep` is recorded
instead of waited.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from cobalt.shared.clients import (
    DEFAULT_MAX_RETRIES,
    ExecutorClient,
    InferenceControlClient,
    RetryPolicy,
    ServiceClient,
    TrainingClient,
    wait_until_ready,
)
from cobalt.shared.contracts import RunCodeRequest
from cobalt.shared.errors import (
    Conflict,
    InvalidInput,
    NotFound,
    Overloaded,
    Unavailable,
    UpstreamError,
)
from cobalt.shared.ports import free_port
from tests.support.scripted_server import DROP, Reply, error_reply, scripted_server

POLICY = {
    "version": 3,
    "served_name": "policy",
    "weights_path": "/ckpt/3",
    "state": "serving",
    "loaded_at": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
    "loads": 3,
    "failed_loads": 0,
}
LOADED = {"version": 4, "path": "/ckpt/4", "load_s": 0.5, "drain_s": 0.0}


@dataclass(frozen=True)
class Call:
    """One idempotent call of one client, and the body a successful answer carries."""

    name: str
    build: Callable[..., ServiceClient]
    send: Callable[[Any], Any]
    ok_body: dict[str, Any]
    service: str


CALLS = [
    Call(
        "executor",
        ExecutorClient,
        lambda client: client.run_code(RunCodeRequest(code="print(1)")).status,
        {"status": "Success", "message": ""},
        "executor",
    ),
    Call(
        "inference",
        InferenceControlClient,
        lambda client: client.status().version,
        POLICY,
        "inference service",
    ),
    Call(
        "training",
        TrainingClient,
        lambda client: client.start_round(7, 1).round,
        {"round": 1, "contexts": [], "queued": True},
        "orchestrator",
    ),
]


def connect(call: Call, url: str, **kwargs: Any) -> tuple[ServiceClient, list[float]]:
    sleeps: list[float] = []
    return call.build(base_url=url, sleep=sleeps.append, **kwargs), sleeps


@pytest.fixture(params=CALLS, ids=[call.name for call in CALLS])
def call(request: pytest.FixtureRequest) -> Call:
    return request.param  # type: ignore[no-any-return]


def test_503_with_retry_after_is_retried_after_that_long(call: Call) -> None:
    script = [error_reply(503, "not ready", Retry_After="3"), Reply(200, call.ok_body)]
    with scripted_server(*script) as server:
        client, sleeps = connect(call, server.url)
        with client:
            answer = call.send(client)
    assert answer in ("Success", 3, 1)
    assert len(server.requests) == 2
    assert sleeps == [3.0]


def test_a_4xx_is_not_retried_and_keeps_the_servers_message(call: Call) -> None:
    with scripted_server(
        error_reply(422, "field x: too large"), Reply(200, call.ok_body)
    ) as server:
        client, sleeps = connect(call, server.url)
        with client, pytest.raises(InvalidInput, match="field x: too large"):
            call.send(client)
    assert len(server.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize(("status", "error"), [(404, NotFound), (409, Conflict)])
def test_other_4xx_map_to_the_error_tree_at_once(
    call: Call, status: int, error: type[Exception]
) -> None:
    with scripted_server(error_reply(status, "no such thing")) as server:
        client, sleeps = connect(call, server.url)
        with client, pytest.raises(error, match="no such thing") as caught:
            call.send(client)
    assert len(server.requests) == 1
    assert sleeps == []
    if status == 404:
        assert f"a Cobalt {call.service}" in str(caught.value)


def test_503_through_every_retry_is_unavailable(call: Call) -> None:
    with scripted_server(*[error_reply(503, "canary failed")] * 3) as server:
        client, sleeps = connect(call, server.url, retry=RetryPolicy(max_retries=2))
        with client, pytest.raises(Unavailable, match="canary failed"):
            call.send(client)
    assert len(server.requests) == 3
    assert len(sleeps) == 2


def test_429_through_every_retry_is_overloaded(call: Call) -> None:
    with scripted_server(*[error_reply(429, "queue full", Retry_After="2")] * 2) as server:
        client, sleeps = connect(call, server.url, retry=RetryPolicy(max_retries=1))
        with client, pytest.raises(Overloaded, match="queue full") as caught:
            call.send(client)
    assert caught.value.retry_after_s == 2.0
    assert sleeps == [2.0]
    assert len(server.requests) == 2


def test_a_500_is_not_retried(call: Call) -> None:
    with scripted_server(error_reply(500, "see the server log"), Reply(200, call.ok_body)) as s:
        client, sleeps = connect(call, s.url)
        with client, pytest.raises(UpstreamError) as caught:
            call.send(client)
    assert caught.value.upstream_status == 500
    assert len(s.requests) == 1


def test_an_idempotent_call_is_retried_after_a_dropped_connection(call: Call) -> None:
    with scripted_server(DROP, Reply(200, call.ok_body)) as server:
        client, sleeps = connect(call, server.url)
        with client:
            call.send(client)
    assert len(server.requests) == 2
    assert len(sleeps) == 1


def test_nobody_listening_is_unavailable_after_every_retry(call: Call) -> None:
    port = free_port()  # nothing listens there: connections are refused
    client, sleeps = connect(call, f"http://127.0.0.1:{port}")
    with client, pytest.raises(Unavailable, match=f"{DEFAULT_MAX_RETRIES + 1} attempts") as e:
        call.send(client)
    assert len(sleeps) == DEFAULT_MAX_RETRIES
    assert call.service in str(e.value)
    assert isinstance(e.value.__cause__, httpx.ConnectError)


# --- calls that must not run twice ------------------------------------------------------


def test_a_weight_load_is_not_sent_again_after_a_dropped_connection() -> None:
    with scripted_server(DROP, Reply(200, LOADED)) as server:
        sleeps: list[float] = []
        with InferenceControlClient(server.url, sleep=sleeps.append) as client:
            with pytest.raises(Unavailable, match="1 attempt"):
                client.load_weights("/ckpt/4")
    assert server.requests == [("POST", "/v1/policy/weights")]
    assert sleeps == []


def test_a_weight_load_refused_with_503_is_sent_again() -> None:
    refused = error_reply(503, "drain timed out; nothing was loaded", Retry_After="1")
    with scripted_server(refused, Reply(200, LOADED)) as server:
        sleeps: list[float] = []
        with InferenceControlClient(server.url, sleep=sleeps.append) as client:
            assert client.load_weights("/ckpt/4").version == 4
    assert len(server.requests) == 2
    assert sleeps == [1.0]


def test_a_gateway_error_retries_reads_but_not_a_weight_load() -> None:
    gateway = Reply(502, None)
    with scripted_server(gateway, Reply(200, POLICY), gateway) as server:
        sleeps: list[float] = []
        with InferenceControlClient(server.url, sleep=sleeps.append) as client:
            assert client.status().version == 3
            with pytest.raises(UpstreamError) as caught:
                client.load_weights("/ckpt/4")
    assert caught.value.upstream_status == 502
    assert len(server.requests) == 3
    assert len(sleeps) == 1


# --- the policy itself ------------------------------------------------------------------


def response(status: int, **headers: str) -> httpx.Response:
    return httpx.Response(status, headers=headers)


@pytest.mark.parametrize(
    ("outcome", "idempotent", "retried"),
    [
        (httpx.ConnectError("refused"), False, True),
        (httpx.ConnectTimeout("slow"), False, True),
        (httpx.ReadTimeout("slow"), True, True),
        (httpx.ReadTimeout("slow"), False, False),
        (httpx.RemoteProtocolError("dropped"), False, False),
        (httpx.UnsupportedProtocol("ftp"), True, False),
        (response(503), False, True),
        (response(429), False, True),
        (response(502), True, True),
        (response(504), False, False),
        (response(500), True, False),
        (response(400), True, False),
        (response(409), True, False),
    ],
)
def test_which_outcomes_are_retried(outcome: Any, idempotent: bool, retried: bool) -> None:
    delay = RetryPolicy().delay(outcome, attempt=0, idempotent=idempotent)
    assert (delay is not None) is retried


def test_backoff_doubles_with_jitter_and_is_capped() -> None:
    policy = RetryPolicy(max_retries=8, backoff_s=0.5, max_backoff_s=4.0)
    for retry in range(8):
        delay = policy.delay(response(503), attempt=retry, idempotent=True)
        ceiling = min(4.0, 0.5 * 2**retry)
        assert delay is not None and ceiling / 2 <= delay <= ceiling
    assert policy.delay(response(503), attempt=8, idempotent=True) is None


def test_retry_after_is_capped_and_a_past_date_means_now() -> None:
    policy = RetryPolicy(max_retry_after_s=30.0)
    assert policy.retry_after(response(503, **{"Retry-After": "86400"})) == 30.0
    past = "Wed, 21 Oct 2015 07:28:00 GMT"
    assert policy.retry_after(response(503, **{"Retry-After": past})) == 0.0
    assert policy.retry_after(response(503, **{"Retry-After": "soon"})) is None


def test_a_negative_retry_count_is_refused() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        RetryPolicy(max_retries=-1)


# --- waiting for a service that is starting ---------------------------------------------


def test_wait_until_ready_polls_until_200() -> None:
    with scripted_server(Reply(503), Reply(503), Reply(200, {"status": "ready"})) as server:
        ticks: list[float] = []
        wait_until_ready(f"{server.url}/readyz", timeout_s=60, on_tick=ticks.append, interval_s=0)
    assert server.requests == [("GET", "/readyz")] * 3
    assert len(ticks) == 2


def test_wait_until_ready_stops_when_the_process_is_gone() -> None:
    with scripted_server(Reply(200, {})) as server:
        with pytest.raises(Unavailable, match="exited"):
            wait_until_ready(f"{server.url}/readyz", timeout_s=60, is_alive=lambda: False)
    assert server.requests == []


def test_wait_until_ready_gives_up_after_its_timeout() -> None:
    with scripted_server(Reply(503), Reply(503)) as server:
        with pytest.raises(Unavailable, match="did not answer 200"):
            wait_until_ready(f"{server.url}/readyz", timeout_s=0, interval_s=0)
    assert len(server.requests) == 1
