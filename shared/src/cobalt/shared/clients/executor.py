"""Typed HTTP clients for the executor service: `ExecutorClient` and `AsyncExecutorClient`.

This module owns how Cobalt talks to the executor over HTTP: the endpoint paths, the
bearer header, the retry policy and the translation of every failure into the shared
error tree, so callers see either a contract or a `CobaltError`, never an httpx error.

Retries: up to `max_retries` more attempts, with exponential backoff and jitter, on
429 (honouring Retry-After, capped at `MAX_RETRY_AFTER_S`), 502, 503, 504 and on
transport errors that may pass (connect and read errors, timeouts, dropped connections).
Every request is safe to repeat: judging a program has no side effects.

Errors, once retries are used up:

    transport error                    -> Unavailable (names the URL and what to check)
    400, 422 / 413                     -> InvalidInput / PayloadTooLarge
    401 / 404 / 409                    -> Unauthorized / NotFound / Conflict
    429                                -> Overloaded (retry_after_s from Retry-After)
    other 4xx, 5xx, unparsable body    -> UpstreamError (upstream_status set)

4xx messages are the executor's own (they say what to change in the request).
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from types import TracebackType
from typing import Self, TypeVar

import httpx
from pydantic import BaseModel, Field, SecretStr, ValidationError
from pydantic_settings import SettingsConfigDict

from cobalt.shared.clients.responses import error_envelope as _envelope
from cobalt.shared.contracts import (
    BatchExecuteRequest,
    BatchExecuteResponse,
    ExecuteRequest,
    ExecuteResponse,
    ExecutorInfo,
    RunCodeRequest,
    RunCodeResponse,
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
from cobalt.shared.settings import CobaltSettings

__all__ = [
    "AsyncExecutorClient",
    "DEFAULT_BACKOFF_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_TIMEOUT_S",
    "ExecutorClient",
    "ExecutorClientSettings",
    "MAX_BACKOFF_S",
    "MAX_RETRY_AFTER_S",
    "RETRY_STATUSES",
]

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0
"""Seconds to wait for a response: the executor answers only once every test is judged."""

DEFAULT_CONNECT_TIMEOUT_S = 5.0
"""Seconds to wait for a TCP connection; a live executor accepts at once."""

DEFAULT_TIMEOUT = httpx.Timeout(DEFAULT_TIMEOUT_S, connect=DEFAULT_CONNECT_TIMEOUT_S)
"""The timeouts of a client this module builds."""

DEFAULT_LIMITS = httpx.Limits(max_connections=64, max_keepalive_connections=16)
"""Connection-pool size of a client this module builds (requests in flight at once)."""

DEFAULT_MAX_RETRIES = 4
"""Attempts after the first one before giving up (so 5 attempts in all)."""

DEFAULT_BACKOFF_S = 0.5
"""Seconds before the first retry; doubled on each further retry, then jittered."""

MAX_BACKOFF_S = 8.0
"""Ceiling, in seconds, of one backoff delay."""

MAX_RETRY_AFTER_S = 60.0
"""Ceiling, in seconds, on how long a Retry-After header can make us wait."""

RETRY_STATUSES = frozenset({429, 502, 503, 504})
"""HTTP statuses that mean "try again later" rather than "this request is wrong"."""

_STATUS_ERRORS: dict[int, type[CobaltError]] = {
    400: InvalidInput,
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidInput,
}

_RETRYABLE_TRANSPORT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)

_Model = TypeVar("_Model", bound=BaseModel)


class ExecutorClientSettings(CobaltSettings):
    """Where the executor is and how to call it, from `COBALT_EXECUTOR_*` variables."""

    model_config = SettingsConfigDict(env_prefix="COBALT_EXECUTOR_", frozen=True, extra="ignore")

    url: str | None = None
    """Base URL of the executor, e.g. http://127.0.0.1:8100; unset means none is configured."""
    auth_token: SecretStr | None = None
    """Bearer token; the same variable the executor server reads."""
    client_timeout_s: float = Field(default=DEFAULT_TIMEOUT_S, gt=0)
    """Seconds to wait for one response (a large request is judged before it answers)."""
    client_max_retries: int = Field(default=DEFAULT_MAX_RETRIES, ge=0, le=20)
    """Attempts after the first one on 429, 502-504 and transport errors."""


# --- what both clients share ------------------------------------------------------------


def _timeout(value: float | httpx.Timeout) -> httpx.Timeout:
    if isinstance(value, httpx.Timeout):
        return value
    return httpx.Timeout(value, connect=min(value, DEFAULT_CONNECT_TIMEOUT_S))


def _auth_headers(token: str | SecretStr | None) -> dict[str, str]:
    if isinstance(token, SecretStr):
        token = token.get_secret_value()
    return {"Authorization": f"Bearer {token}"} if token else {}


def _check_arguments(
    *,
    client: object | None,
    base_url: str | None,
    timeout: float | httpx.Timeout,
    limits: httpx.Limits,
    transport: object | None,
    max_retries: int,
) -> None:
    if max_retries < 0:
        raise ValueError(f"max_retries must be 0 or more, got {max_retries}")
    if client is None and not base_url:
        raise ValueError(
            "pass base_url= (e.g. 'http://127.0.0.1:8100', or set COBALT_EXECUTOR_URL and use "
            "from_settings) or an httpx client= to send requests with"
        )
    built_args = base_url or transport is not None
    if client is not None and (
        built_args or timeout is not DEFAULT_TIMEOUT or limits is not DEFAULT_LIMITS
    ):
        raise ValueError(
            "pass either client= or base_url=/timeout=/limits=/transport= (to build one), "
            "not both: configure the injected client itself"
        )
    if base_url:
        try:
            scheme = httpx.URL(base_url).scheme
        except httpx.InvalidURL as exc:
            raise ValueError(f"executor URL {base_url!r} is not a valid URL: {exc}") from exc
        if scheme not in ("http", "https"):
            raise ValueError(
                f"executor URL {base_url!r} must start with http:// or https:// "
                "(e.g. http://127.0.0.1:8100)"
            )


def _settings_url(settings: ExecutorClientSettings) -> str:
    if not settings.url:
        raise ValueError("COBALT_EXECUTOR_URL is not set: set it to the executor's base URL")
    return settings.url


def _backoff_s(retry: int) -> float:
    ceiling = min(MAX_BACKOFF_S, DEFAULT_BACKOFF_S * 2**retry)
    # "Equal jitter": callers that failed together spread out, and no delay is near zero.
    return random.uniform(ceiling / 2, ceiling)


def _retry_after_s(response: httpx.Response) -> float | None:
    """Seconds the Retry-After header asks for (delta-seconds or HTTP-date), capped."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - datetime.now(UTC)).total_seconds()
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _attempts(count: int) -> str:
    return f"{count} attempt{'s' if count != 1 else ''}"


def _status_error(response: httpx.Response, *, url: str, attempts: int) -> CobaltError:
    status = response.status_code
    message, detail = _envelope(response)
    if status == 429:
        retry_after = _retry_after_s(response)
        return Overloaded(
            f"{message} (gave up after {_attempts(attempts)})",
            retry_after_s=retry_after if retry_after is not None else 1.0,
            detail=detail,
        )
    if status == 404:
        message = f"{message} ({url}); check that the URL points to a Cobalt executor"
    error_class = _STATUS_ERRORS.get(status)
    if error_class is not None:
        return error_class(message, detail=detail)
    tries = f" after {_attempts(attempts)}" if attempts > 1 else ""
    return UpstreamError(
        f"executor at {url} answered {status}{tries}: {message}", status_code=status, detail=detail
    )


def _unreachable(exc: httpx.TransportError, *, url: str, attempts: int) -> Unavailable:
    return Unavailable(
        f"cannot reach the executor at {url} ({type(exc).__name__}: {str(exc) or 'no detail'}; "
        f"{_attempts(attempts)}): check that it is running "
        "(`cobalt executor serve`) and that COBALT_EXECUTOR_URL points to it",
    )


def _judge_attempt(
    outcome: httpx.Response | httpx.TransportError, *, url: str, attempt: int, max_retries: int
) -> httpx.Response | float:
    """Judge one attempt: a successful response, seconds to wait before retrying, or raise.

    Raises:
        CobaltError: the attempt failed and may not (or may no longer) be retried.
    """
    if isinstance(outcome, httpx.TransportError):
        if not isinstance(outcome, _RETRYABLE_TRANSPORT) or attempt >= max_retries:
            raise _unreachable(outcome, url=url, attempts=attempt + 1) from outcome
        delay, reason = _backoff_s(attempt), type(outcome).__name__
    elif outcome.status_code in RETRY_STATUSES and attempt < max_retries:
        retry_after = _retry_after_s(outcome)
        delay = retry_after if retry_after is not None else _backoff_s(attempt)
        reason = f"HTTP {outcome.status_code}"
    else:
        try:
            outcome.raise_for_status()
        except httpx.HTTPStatusError as exc:
            raise _status_error(outcome, url=url, attempts=attempt + 1) from exc
        return outcome
    logger.warning(
        "executor %s: %s; retry %d of %d in %.2fs", url, reason, attempt + 1, max_retries, delay
    )
    return delay


def _parse(response: httpx.Response, model: type[_Model]) -> _Model:
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise UpstreamError(
            f"executor at {response.request.url} answered {response.status_code} with a body "
            f"that is not a valid {model.__name__}; check that the URL points to a Cobalt "
            "executor of a compatible version",
            status_code=response.status_code,
        ) from exc


def _url(client: httpx.Client | httpx.AsyncClient, path: str) -> str:
    return str(client.base_url).rstrip("/") + path


# --- the clients --------------------------------------------------------------------------


class ExecutorClient:
    """Blocking client for one executor: one method per endpoint, contracts in and out.

    Either wraps an injected `httpx.Client` (the caller keeps owning it: `close()` leaves it
    open) or builds one from `base_url`, `timeout`, `limits` and `transport`. Every method
    except `health` and `ready` retries as the module docstring describes and raises only
    `CobaltError` subclasses.

    Example:
        >>> with ExecutorClient(base_url="http://127.0.0.1:8100") as executor:  # doctest: +SKIP
        ...     executor.execute(request).pass_rate
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        token: str | SecretStr | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        limits: httpx.Limits = DEFAULT_LIMITS,
        transport: httpx.BaseTransport | None = None,
        client: httpx.Client | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        """Build or wrap the HTTP client.

        Args:
            base_url: The executor's base URL, for a client built here.
            token: Bearer token sent with every request (also with an injected client).
            timeout: Seconds, or an `httpx.Timeout`, for a client built here.
            limits: Connection-pool limits for a client built here.
            transport: An httpx transport for a client built here (tests pass
                `httpx.MockTransport`).
            client: An httpx client to use instead of building one; it keeps its own
                base URL, timeouts and transport, and the caller closes it.
            max_retries: Attempts after the first on retryable failures; 0 disables retries.
            sleep: Called with the seconds to wait between attempts (tests record them).

        Raises:
            ValueError: neither `base_url` nor `client` is given, both are, or
                `max_retries` is negative.
        """
        _check_arguments(
            client=client,
            base_url=base_url,
            timeout=timeout,
            limits=limits,
            transport=transport,
            max_retries=max_retries,
        )
        if client is not None and not isinstance(client, httpx.Client):
            raise TypeError(f"client must be an httpx.Client, not {type(client).__name__}")
        self._owns_client = client is None
        if client is None:
            client = httpx.Client(
                base_url=base_url or "",
                timeout=_timeout(timeout),
                limits=limits,
                transport=transport,
            )
        self._client = client
        self._auth = _auth_headers(token)
        self.max_retries = max_retries
        self._sleep = sleep

    @classmethod
    def from_settings(
        cls,
        settings: ExecutorClientSettings,
        *,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], object] = time.sleep,
    ) -> Self:
        """A client for the executor that `settings` name.

        Raises:
            ValueError: `settings.url` (COBALT_EXECUTOR_URL) is not set.
        """
        return cls(
            base_url=_settings_url(settings),
            token=settings.auth_token,
            timeout=settings.client_timeout_s,
            transport=transport,
            max_retries=settings.client_max_retries,
            sleep=sleep,
        )

    @property
    def base_url(self) -> str:
        """The executor's base URL."""
        return str(self._client.base_url)

    @property
    def token(self) -> str | None:
        """The bearer token this client sends (to hand the same executor to a worker)."""
        header = self._auth.get("Authorization")
        return header.removeprefix("Bearer ") if header else None

    def close(self) -> None:
        """Close the HTTP client if this object built it; an injected one stays open."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def execute(self, request: ExecuteRequest) -> ExecuteResponse:
        """Run one program on its tests (`POST /v1/execute`).

        Args:
            request: The program, its tests and limits.

        Returns:
            Per-test verdicts in test order, plus the summary.

        Raises:
            InvalidInput: the executor refused the request (e.g. a limit above its maximum);
                `PayloadTooLarge` when the body is over its size cap.
            Unauthorized: the token is missing or wrong.
            Overloaded: the executor stayed full through every retry.
            Unavailable: the executor could not be reached.
            UpstreamError: it answered 5xx through every retry, or something unparsable.
        """
        return _parse(self._send("POST", "/v1/execute", request), ExecuteResponse)

    def execute_batch(self, batch: BatchExecuteRequest) -> BatchExecuteResponse:
        """Run many programs in one call (`POST /v1/execute/batch`); raises as `execute`.

        Returns:
            One response per request, in request order.
        """
        return _parse(self._send("POST", "/v1/execute/batch", batch), BatchExecuteResponse)

    def run_code(self, request: RunCodeRequest) -> RunCodeResponse:
        """Run a script once, SandboxFusion style (`POST /run_code`); raises as `execute`."""
        return _parse(self._send("POST", "/run_code", request), RunCodeResponse)

    def info(self) -> ExecutorInfo:
        """Languages, limits and capacity of the executor (`GET /v1/info`); raises as `execute`."""
        return _parse(self._send("GET", "/v1/info"), ExecutorInfo)

    def metrics(self) -> str:
        """The executor's Prometheus metrics as text (`GET /metrics`); raises as `execute`."""
        return self._send("GET", "/metrics").text

    def health(self) -> bool:
        """Whether the executor process serves HTTP (`GET /healthz`). One try; never raises."""
        return self._probe("/healthz")

    def ready(self) -> bool:
        """Whether a canary ran in a real sandbox (`GET /readyz`). One try; never raises."""
        return self._probe("/readyz")

    def _probe(self, path: str) -> bool:
        try:
            response = self._client.get(path, headers=self._auth)
        except httpx.TransportError:
            return False
        return response.status_code == 200

    def _send(self, method: str, path: str, body: BaseModel | None = None) -> httpx.Response:
        content = body.model_dump_json().encode() if body is not None else None
        headers = {**self._auth, "Content-Type": "application/json"} if content else self._auth
        url = _url(self._client, path)
        attempt = 0
        while True:
            try:
                outcome: httpx.Response | httpx.TransportError = self._client.request(
                    method, path, content=content, headers=headers
                )
            except httpx.TransportError as exc:
                outcome = exc
            result = _judge_attempt(outcome, url=url, attempt=attempt, max_retries=self.max_retries)
            if isinstance(result, httpx.Response):
                return result
            self._sleep(result)
            attempt += 1


class AsyncExecutorClient:
    """Asyncio client for one executor; the same methods as `ExecutorClient`, awaited.

    Either wraps an injected `httpx.AsyncClient` (the caller keeps owning it) or builds one
    from `base_url`, `timeout`, `limits` and `transport`.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        token: str | SecretStr | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        limits: httpx.Limits = DEFAULT_LIMITS,
        transport: httpx.AsyncBaseTransport | None = None,
        client: httpx.AsyncClient | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        """Build or wrap the HTTP client; the arguments are those of `ExecutorClient`.

        `transport` and `client` are the async httpx kinds (tests pass `httpx.MockTransport`
        or `httpx.ASGITransport`), and `sleep` is awaited between attempts.

        Raises:
            ValueError: as `ExecutorClient`.
        """
        _check_arguments(
            client=client,
            base_url=base_url,
            timeout=timeout,
            limits=limits,
            transport=transport,
            max_retries=max_retries,
        )
        if client is not None and not isinstance(client, httpx.AsyncClient):
            raise TypeError(f"client must be an httpx.AsyncClient, not {type(client).__name__}")
        self._owns_client = client is None
        if client is None:
            client = httpx.AsyncClient(
                base_url=base_url or "",
                timeout=_timeout(timeout),
                limits=limits,
                transport=transport,
            )
        self._client = client
        self._auth = _auth_headers(token)
        self.max_retries = max_retries
        self._sleep = sleep

    @classmethod
    def from_settings(
        cls,
        settings: ExecutorClientSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> Self:
        """A client for the executor that `settings` name.

        Raises:
            ValueError: `settings.url` (COBALT_EXECUTOR_URL) is not set.
        """
        return cls(
            base_url=_settings_url(settings),
            token=settings.auth_token,
            timeout=settings.client_timeout_s,
            transport=transport,
            max_retries=settings.client_max_retries,
            sleep=sleep,
        )

    @property
    def base_url(self) -> str:
        """The executor's base URL."""
        return str(self._client.base_url)

    async def close(self) -> None:
        """Close the HTTP client if this object built it; an injected one stays open."""
        if self._owns_client:
            await self._client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def execute(self, request: ExecuteRequest) -> ExecuteResponse:
        """Run one program on its tests (`POST /v1/execute`); see `ExecutorClient.execute`."""
        return _parse(await self._send("POST", "/v1/execute", request), ExecuteResponse)

    async def execute_batch(self, batch: BatchExecuteRequest) -> BatchExecuteResponse:
        """Run many programs in one call (`POST /v1/execute/batch`); raises as `execute`."""
        response = await self._send("POST", "/v1/execute/batch", batch)
        return _parse(response, BatchExecuteResponse)

    async def run_code(self, request: RunCodeRequest) -> RunCodeResponse:
        """Run a script once, SandboxFusion style (`POST /run_code`); raises as `execute`."""
        return _parse(await self._send("POST", "/run_code", request), RunCodeResponse)

    async def info(self) -> ExecutorInfo:
        """Languages, limits and capacity of the executor (`GET /v1/info`); raises as `execute`."""
        return _parse(await self._send("GET", "/v1/info"), ExecutorInfo)

    async def metrics(self) -> str:
        """The executor's Prometheus metrics as text (`GET /metrics`); raises as `execute`."""
        return (await self._send("GET", "/metrics")).text

    async def health(self) -> bool:
        """Whether the executor process serves HTTP (`GET /healthz`). One try; never raises."""
        return await self._probe("/healthz")

    async def ready(self) -> bool:
        """Whether a canary ran in a real sandbox (`GET /readyz`). One try; never raises."""
        return await self._probe("/readyz")

    async def _probe(self, path: str) -> bool:
        try:
            response = await self._client.get(path, headers=self._auth)
        except httpx.TransportError:
            return False
        return response.status_code == 200

    async def _send(self, method: str, path: str, body: BaseModel | None = None) -> httpx.Response:
        content = body.model_dump_json().encode() if body is not None else None
        headers = {**self._auth, "Content-Type": "application/json"} if content else self._auth
        url = _url(self._client, path)
        attempt = 0
        while True:
            try:
                outcome: httpx.Response | httpx.TransportError = await self._client.request(
                    method, path, content=content, headers=headers
                )
            except httpx.TransportError as exc:
                outcome = exc
            result = _judge_attempt(outcome, url=url, attempt=attempt, max_retries=self.max_retries)
            if isinstance(result, httpx.Response):
                return result
            await self._sleep(result)
            attempt += 1
