"""Model endpoint settings and the inference control client, without a vLLM server."""

from __future__ import annotations

import json

import httpx
import pytest

from cobalt.shared.clients import RetryPolicy
from cobalt.shared.clients.inference import (
    InferenceControlClient,
    ModelEndpoint,
    PolicyEndpointSettings,
    ReferenceEndpointSettings,
    policy_version_of,
)
from cobalt.shared.errors import Conflict, InvalidInput, Unauthorized, Unavailable, UpstreamError


def test_endpoint_settings_need_a_model_with_a_url(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ReferenceEndpointSettings().endpoint() is None
    monkeypatch.setenv("COBALT_POLICY_BASE_URL", "http://gpu-1:8000/v1")
    with pytest.raises(ValueError, match="COBALT_POLICY_MODEL"):
        PolicyEndpointSettings().endpoint()
    monkeypatch.setenv("COBALT_POLICY_MODEL", "policy")
    endpoint = PolicyEndpointSettings().endpoint()
    assert endpoint == ModelEndpoint(base_url="http://gpu-1:8000/v1", model="policy")
    assert endpoint.openai_kwargs() == {"base_url": "http://gpu-1:8000/v1", "api_key": "unused"}
    assert endpoint.extra_body() == {"return_token_ids": True}


def test_api_key_is_passed_and_never_printed() -> None:
    endpoint = ModelEndpoint(base_url="http://x/v1", model="m", api_key="sk-secret")
    assert endpoint.openai_kwargs()["api_key"] == "sk-secret"
    assert "sk-secret" not in repr(endpoint)


def test_policy_version_header_parsing() -> None:
    assert policy_version_of(httpx.Headers({"x-cobalt-policy-version": "12"})) == 12
    assert policy_version_of(httpx.Headers({})) is None
    assert policy_version_of(httpx.Headers({"x-cobalt-policy-version": "x"})) is None


def control_client(status: int, body: object) -> InferenceControlClient:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.headers["authorization"] == "Bearer t"
        return httpx.Response(status, content=json.dumps(body).encode())

    return InferenceControlClient(
        "http://inference",
        token="t",
        transport=httpx.MockTransport(handler),
        retry=RetryPolicy(max_retries=0),
    )


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, Unauthorized),
        (409, Conflict),
        (422, InvalidInput),
        (503, Unavailable),
        (500, UpstreamError),
    ],
)
def test_control_errors_map_to_the_error_tree(status: int, error: type[Exception]) -> None:
    body = {"error": {"message": f"reason {status}", "type": "x", "code": status}}
    with control_client(status, body) as client, pytest.raises(error, match=f"reason {status}"):
        client.load_weights("/ckpt")


def test_control_client_parses_results() -> None:
    body = {"version": 3, "path": "/ckpt", "load_s": 0.5, "drain_s": 0.0}
    with control_client(200, body) as client:
        assert client.load_weights("/ckpt").version == 3
    with control_client(200, {"unexpected": True}) as client, pytest.raises(UpstreamError):
        client.status()


def test_unreachable_inference_service_is_unavailable() -> None:
    with InferenceControlClient(
        "http://127.0.0.1:9", timeout=2, retry=RetryPolicy(max_retries=0)
    ) as client:
        with pytest.raises(Unavailable, match="cobalt inference serve"):
            client.status()
