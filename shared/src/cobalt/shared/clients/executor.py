"""Typed HTTP clients for the executor service: `ExecutorClient` and `AsyncExecutorClient`.

This module owns what is particular to the executor: its endpoint paths, where it is
configured (`COBALT_EXECUTOR_*`) and how long a response may take. How a call is sent,
retried and turned into a contract or a `CobaltError` is `cobalt.shared.clients.base`'s,
the same for every Cobalt client. Every executor call is safe to repeat (judging a
program has no side effects), so all of them retry on every retryable outcome.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Self

import httpx
from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from cobalt.shared.clients.base import (
    DEFAULT_CONNECT_TIMEOUT_S,
    DEFAULT_LIMITS,
    DEFAULT_MAX_RETRIES,
    AsyncServiceClient,
    RetryPolicy,
    ServiceClient,
)
from cobalt.shared.contracts import (
    BatchExecuteRequest,
    BatchExecuteResponse,
    ExecuteRequest,
    ExecuteResponse,
    ExecutorInfo,
    RunCodeRequest,
    RunCodeResponse,
)
from cobalt.shared.settings import CobaltSettings

__all__ = [
    "AsyncExecutorClient",
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_TIMEOUT_S",
    "ExecutorAddress",
    "ExecutorClient",
    "ExecutorClientSettings",
]

DEFAULT_TIMEOUT_S = 300.0
"""Seconds to wait for a response: the executor answers only once every test is judged."""

DEFAULT_TIMEOUT = httpx.Timeout(DEFAULT_TIMEOUT_S, connect=DEFAULT_CONNECT_TIMEOUT_S)
"""The timeouts of an executor client built without one."""

_START_HINT = (
    "check that it is running (`cobalt executor serve`) and that COBALT_EXECUTOR_URL points to it"
)


@dataclass(frozen=True, slots=True)
class ExecutorAddress:
    """Where one executor is and the token it wants: what a caller hands a job, instead of
    a (URL, token) pair or two loose fields."""

    url: str
    token: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Seconds to wait for one response (COBALT_EXECUTOR_CLIENT_TIMEOUT_S)."""
    max_retries: int = DEFAULT_MAX_RETRIES
    """Attempts after the first one (COBALT_EXECUTOR_CLIENT_MAX_RETRIES)."""

    def __repr__(self) -> str:  # the token is a secret
        return f"ExecutorAddress(url={self.url!r})"


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

    def base_url(self) -> str:
        """The configured URL.

        Raises:
            ValueError: COBALT_EXECUTOR_URL is not set.
        """
        if not self.url:
            raise ValueError("COBALT_EXECUTOR_URL is not set: set it to the executor's base URL")
        return self.url

    def address(self) -> ExecutorAddress | None:
        """The configured executor (None: COBALT_EXECUTOR_URL is not set)."""
        if not self.url:
            return None
        token = self.auth_token.get_secret_value() if self.auth_token else None
        return ExecutorAddress(
            self.url, token, timeout_s=self.client_timeout_s, max_retries=self.client_max_retries
        )

    def retry(self) -> RetryPolicy:
        """The retry policy with the configured number of retries."""
        return RetryPolicy(max_retries=self.client_max_retries)


class ExecutorClient(ServiceClient):
    """Blocking client for one executor: one method per endpoint, contracts in and out.

    Every method except `health` and `ready` retries as `cobalt.shared.clients.base`
    describes and raises only `CobaltError` subclasses.

    Example:
        >>> with ExecutorClient(base_url="http://127.0.0.1:8100") as executor:  # doctest: +SKIP
        ...     executor.execute(request).pass_rate
    """

    service = "executor"
    start_hint = _START_HINT
    default_timeout_s = DEFAULT_TIMEOUT_S

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
            base_url=settings.base_url(),
            token=settings.auth_token,
            timeout=settings.client_timeout_s,
            transport=transport,
            retry=settings.retry(),
            sleep=sleep,
        )

    def address(self) -> ExecutorAddress:
        """This executor with this client's token, timeout and retries, for the jobs
        (and their asyncio clients) that call it."""
        read_timeout = self._client.timeout.read
        return ExecutorAddress(
            self.base_url,
            self.token,
            timeout_s=DEFAULT_TIMEOUT_S if read_timeout is None else read_timeout,
            max_retries=self.retry.max_retries,
        )

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
            Unavailable: the executor could not be reached, or was not ready through
                every retry.
            UpstreamError: it answered another 5xx, or something unparsable.
        """
        return self._parse(self._send("POST", "/v1/execute", request), ExecuteResponse)

    def execute_batch(self, batch: BatchExecuteRequest) -> BatchExecuteResponse:
        """Run many programs in one call (`POST /v1/execute/batch`); raises as `execute`.

        Returns:
            One response per request, in request order.
        """
        return self._parse(self._send("POST", "/v1/execute/batch", batch), BatchExecuteResponse)

    def run_code(self, request: RunCodeRequest) -> RunCodeResponse:
        """Run a script once, SandboxFusion style (`POST /run_code`); raises as `execute`."""
        return self._parse(self._send("POST", "/run_code", request), RunCodeResponse)

    def info(self) -> ExecutorInfo:
        """Languages, limits and capacity of the executor (`GET /v1/info`); raises as `execute`."""
        return self._parse(self._send("GET", "/v1/info"), ExecutorInfo)

    def metrics(self) -> str:
        """The executor's Prometheus metrics as text (`GET /metrics`); raises as `execute`."""
        return self._send("GET", "/metrics").text

    def health(self) -> bool:
        """Whether the executor process serves HTTP (`GET /healthz`). One try; never raises."""
        return self._probe("/healthz")

    def ready(self) -> bool:
        """Whether a canary ran in a real sandbox (`GET /readyz`). One try; never raises."""
        return self._probe("/readyz")


class AsyncExecutorClient(AsyncServiceClient):
    """Asyncio client for one executor; the same methods as `ExecutorClient`, awaited."""

    service = "executor"
    start_hint = _START_HINT
    default_timeout_s = DEFAULT_TIMEOUT_S

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
            base_url=settings.base_url(),
            token=settings.auth_token,
            timeout=settings.client_timeout_s,
            transport=transport,
            retry=settings.retry(),
            sleep=sleep,
        )

    async def execute(self, request: ExecuteRequest) -> ExecuteResponse:
        """Run one program on its tests (`POST /v1/execute`); see `ExecutorClient.execute`."""
        return self._parse(await self._send("POST", "/v1/execute", request), ExecuteResponse)

    async def execute_batch(self, batch: BatchExecuteRequest) -> BatchExecuteResponse:
        """Run many programs in one call (`POST /v1/execute/batch`); raises as `execute`."""
        response = await self._send("POST", "/v1/execute/batch", batch)
        return self._parse(response, BatchExecuteResponse)

    async def run_code(self, request: RunCodeRequest) -> RunCodeResponse:
        """Run a script once, SandboxFusion style (`POST /run_code`); raises as `execute`."""
        return self._parse(await self._send("POST", "/run_code", request), RunCodeResponse)

    async def info(self) -> ExecutorInfo:
        """Languages, limits and capacity of the executor (`GET /v1/info`); raises as `execute`."""
        return self._parse(await self._send("GET", "/v1/info"), ExecutorInfo)

    async def metrics(self) -> str:
        """The executor's Prometheus metrics as text (`GET /metrics`); raises as `execute`."""
        return (await self._send("GET", "/metrics")).text

    async def health(self) -> bool:
        """Whether the executor process serves HTTP (`GET /healthz`). One try; never raises."""
        return await self._probe("/healthz")

    async def ready(self) -> bool:
        """Whether a canary ran in a real sandbox (`GET /readyz`). One try; never raises."""
        return await self._probe("/readyz")
