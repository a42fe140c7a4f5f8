"""Clients for model endpoints: the inference service's control path, and OpenAI-compatible
chat endpoints for the policy and the reference model.

Generation goes through the official `openai` client against any OpenAI-compatible server
(Cobalt's inference service, another vLLM, an API provider); `ModelEndpoint` says where.
Control (load weights, read the policy version) exists only on Cobalt's inference service.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from cobalt.shared.clients.base import ServiceClient
from cobalt.shared.contracts.inference import (
    POLICY_VERSION_HEADER,
    BroadcastWeightsRequest,
    LoadAdapterRequest,
    LoadWeightsRequest,
    LoadWeightsResponse,
    PolicyStatus,
    WeightsIdentity,
)
from cobalt.shared.errors import InvalidInput, Unavailable
from cobalt.shared.settings import CobaltSettings

__all__ = [
    "PROBE_TIMEOUT_S",
    "EndpointProbe",
    "InferenceControlClient",
    "ModelEndpoint",
    "PolicyEndpointSettings",
    "ReferenceEndpointSettings",
    "policy_version_of",
    "probe_endpoint",
    "require_served_model",
    "served_weights",
]

PROBE_TIMEOUT_S = 5.0
"""How long `probe_endpoint` waits: a server that is up answers /models at once."""

VLLM_OWNER = "vllm"
"""What vLLM's OpenAI server (and Cobalt's inference service, which is one) writes in every
model's `owned_by`; OpenAI and other providers write their own names."""


class ModelEndpoint(BaseModel):
    """An OpenAI-compatible endpoint and the model to ask for there."""

    base_url: str = Field(description="Up to and including /v1, e.g. http://127.0.0.1:8000/v1")
    model: str
    api_key: SecretStr | None = None
    vllm_extensions: bool = Field(
        default=True,
        description=(
            "Ask for vLLM's extras (token ids of prompt and completion). Turn off for "
            "providers that reject unknown request fields."
        ),
    )

    def openai_kwargs(self) -> dict[str, str]:
        """Arguments for `openai.OpenAI(...)` / `openai.AsyncOpenAI(...)`."""
        # The openai client insists on a key; servers without auth ignore it.
        key = self.api_key.get_secret_value() if self.api_key is not None else "unused"
        return {"base_url": self.base_url, "api_key": key}

    def extra_body(self) -> dict[str, bool]:
        """Request fields beyond the OpenAI API that make training exact (no re-tokenizing)."""
        return {"return_token_ids": True} if self.vllm_extensions else {}


@dataclass(frozen=True, slots=True)
class EndpointProbe:
    """What one `GET /models` said about an OpenAI-compatible endpoint."""

    models: tuple[str, ...]
    """The model ids it serves (empty when it has no /models route)."""
    vllm: bool
    """It is a vLLM server (every model `owned_by` "vllm"), so it takes vLLM's request
    fields (`return_token_ids`)."""
    status: int = 200
    """The HTTP status of the answer."""
    listed: bool = True
    """The answer was an OpenAI model list (`{"data": [...]}`), as every OpenAI-compatible
    server gives; False for anything else (an HTML page, another API's JSON)."""
    content_type: str = ""


def probe_endpoint(
    base_url: str, api_key: str | None = None, *, timeout_s: float = PROBE_TIMEOUT_S
) -> EndpointProbe:
    """Ask `base_url` (up to /v1) for its models once, without retries.

    Any HTTP answer means the endpoint is reachable; one that is not a model list (a
    provider without /models, a 401) reads as "not vLLM", the safe side: only standard
    request fields are then sent.

    Raises:
        Unavailable: nothing answered (refused, unknown host, timeout): fail fast rather
            than after the sampler's retries.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{base_url.rstrip('/')}/models"
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise Unavailable(
            f"cannot reach the model endpoint {base_url} ({type(exc).__name__}: {exc}); "
            "check that it is running and the URL is right"
        ) from exc
    try:
        body: Any = response.json() if response.is_success else {}
    except ValueError:
        body = {}
    entries = body.get("data") if isinstance(body, dict) else None
    cards = [entry for entry in entries or [] if isinstance(entry, dict)]
    return EndpointProbe(
        models=tuple(str(card.get("id")) for card in cards),
        vllm=bool(cards) and all(card.get("owned_by") == VLLM_OWNER for card in cards),
        status=response.status_code,
        listed=isinstance(entries, list),
        content_type=response.headers.get("content-type", "").split(";")[0].strip(),
    )


def require_served_model(
    base_url: str, model: str, api_key: str | None = None, *, timeout_s: float = PROBE_TIMEOUT_S
) -> EndpointProbe:
    """`probe_endpoint`, then what it read: `model` must be one the endpoint lists.

    What a command checks before it writes a run, so that a wrong name or URL is one
    error rather than a failed trajectory per problem.

    Raises:
        Unavailable: nothing answered, or the endpoint answered with a server error.
        InvalidInput: it refused the key (401, 403), it is not an OpenAI-compatible API
            (its /models is no model list), or it does not serve `model` (the message
            lists what it serves).
    """
    probe = probe_endpoint(base_url, api_key, timeout_s=timeout_s)
    url = f"{base_url.rstrip('/')}/models"
    if probe.status >= 500:
        raise Unavailable(f"the model endpoint {base_url} answered GET {url} with {probe.status}")
    if probe.status in (401, 403):
        raise InvalidInput(
            f"the model endpoint {base_url} refused the key (GET {url}: {probe.status}); "
            "pass --api-key or set COBALT_MODEL_API_KEY"
        )
    if not probe.listed:
        answer = f"{probe.status}" + (f" {probe.content_type}" if probe.content_type else "")
        raise InvalidInput(
            f"{base_url} is not an OpenAI-compatible API: GET {url} answered {answer}, not a "
            "model list; --base-url is the API's root up to /v1 (e.g. http://127.0.0.1:8000/v1)"
        )
    if model not in probe.models:
        served = ", ".join(probe.models[:20]) or "no model"
        raise InvalidInput(
            f"the model endpoint {base_url} does not serve {model!r}; it serves {served} "
            "(pass one of them as --model)"
        )
    return probe


def served_weights(
    base_url: str, api_key: str | None = None, *, timeout_s: float = PROBE_TIMEOUT_S
) -> WeightsIdentity | None:
    """Which weights the endpoint at `base_url` (up to /v1) serves, as Cobalt's inference
    service reports them (`GET /v1/policy`), asked once without retries; None when it
    does not say: another OpenAI-compatible server, an older Cobalt one, a control token
    other than `api_key`, or no answer. What a run records as the policy that produced it.
    """
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{base_url.rstrip('/')}/policy"
    try:
        response = httpx.get(url, headers=headers, timeout=timeout_s)
        if not response.is_success:
            return None
        return PolicyStatus.model_validate_json(response.content).weights
    except (httpx.HTTPError, ValueError):  # ValidationError is a ValueError
        return None


class _EndpointSettings(CobaltSettings):
    base_url: str | None = None
    model: str | None = None
    api_key: SecretStr | None = None
    vllm_extensions: bool | None = None
    """True or False as set; None ("auto", the default): detect with `probe_endpoint`."""

    @field_validator("vllm_extensions", mode="before")
    @classmethod
    def _auto(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() in ("", "auto"):
            return None
        return value

    def endpoint(self) -> ModelEndpoint | None:
        """The configured endpoint, or None when no base URL is set (with "auto", the
        extensions are on: callers that can probe the endpoint read `vllm_extensions`)."""
        if not self.base_url:
            return None
        if not self.model:
            prefix = self.model_config.get("env_prefix", "")
            raise ValueError(f"{prefix}BASE_URL is set but {prefix}MODEL is not")
        return ModelEndpoint(
            base_url=self.base_url,
            model=self.model,
            api_key=self.api_key,
            vllm_extensions=self.vllm_extensions is not False,
        )


class PolicyEndpointSettings(_EndpointSettings):
    """The policy being trained or evaluated (`COBALT_POLICY_BASE_URL`, `_MODEL`, `_API_KEY`)."""

    model_config = SettingsConfigDict(env_prefix="COBALT_POLICY_", frozen=True, extra="ignore")


class ReferenceEndpointSettings(_EndpointSettings):
    """The reference LLM that collects offline trajectories (`COBALT_REFERENCE_*`); any
    OpenAI-compatible endpoint."""

    model_config = SettingsConfigDict(env_prefix="COBALT_REFERENCE_", frozen=True, extra="ignore")


def policy_version_of(headers: Mapping[str, str]) -> int | None:
    """The policy version a Cobalt inference response was generated with (None elsewhere)."""
    value = headers.get(POLICY_VERSION_HEADER)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class InferenceControlClient(ServiceClient):
    """Blocking client for the inference service's control path.

    `base_url` is the server root (http://host:8000), without /v1. Reads retry as every
    client does; a weight load or broadcast is not idempotent (it must not be repeated
    blindly), so it is sent again only when the server cannot have started it: a
    connection that never opened, or a 503 (not ready, drain timed out: nothing loaded).
    """

    service = "inference service"
    start_hint = "check that `cobalt inference serve` is running"
    default_timeout_s = 600.0  # a weight load drains in-flight requests, then loads

    def status(self) -> PolicyStatus:
        """What is serving: policy version, weights directory, state."""
        return self._parse(self._send("GET", "/v1/policy"), PolicyStatus)

    def load_weights(
        self, path: str, *, version: int | None = None, check: bool = True
    ) -> LoadWeightsResponse:
        """Load a checkpoint directory (as the server sees it) and return the new version."""
        request = LoadWeightsRequest(path=path, version=version, check=check)
        response = self._send("POST", "/v1/policy/weights", request, idempotent=False)
        return self._parse(response, LoadWeightsResponse)

    def load_adapter(self, path: str, *, version: int | None = None) -> LoadWeightsResponse:
        """Serve a LoRA adapter directory (as the server sees it) over the base weights as
        the next policy version; the previous adapter is unloaded."""
        request = LoadAdapterRequest(path=path, version=version)
        response = self._send("POST", "/v1/policy/adapter", request, idempotent=False)
        return self._parse(response, LoadWeightsResponse)

    def broadcast_weights(self, request: BroadcastWeightsRequest) -> LoadWeightsResponse:
        """Have the server's workers receive new weights from the caller's process group
        (the caller sends them meanwhile: this returns once every tensor is loaded)."""
        response = self._send("POST", "/v1/policy/broadcast", request, idempotent=False)
        return self._parse(response, LoadWeightsResponse)
