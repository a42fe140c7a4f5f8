"""How every Cobalt client calls a Cobalt service: timeouts, one retry policy, one error map.

`ServiceClient` (blocking) and `AsyncServiceClient` (asyncio) own or wrap one httpx client
for one service root. Subclasses (`ExecutorClient`, `InferenceControlClient`,
`TrainingClient`) only name their endpoints and say which calls are safe to repeat; how a
call is sent, retried and turned into a contract or a `CobaltError` lives here once.

Retries (`RetryPolicy`): up to `max_retries` more attempts, waiting as Retry-After says
(capped) or with exponential backoff and jitter.

    outcome                                      idempotent call   other call
    connect error, connect/pool timeout          retried           retried (never sent)
    read error/timeout, dropped connection       retried           not retried
    429, 503 (the service did not do the work)   retried           retried
    502, 504 (a proxy; the work may have run)    retried           not retried
    any other status (400, 404, 409, 422, 500)   not retried       not retried

Errors, once retries are used up:

    transport error                    -> Unavailable (names the URL and how to start it)
    400, 422 / 413                     -> InvalidInput / PayloadTooLarge
    401 / 403 / 404 / 409              -> Unauthorized / Forbidden / NotFound / Conflict
    429                                -> Overloaded (retry_after_s from Retry-After)
    503                                -> Unavailable
    other 4xx, 5xx, unparsable body    -> UpstreamError (upstream_status set)

Messages are the service's own (its error envelope), so they say what to change.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, ClassVar, Self, TypeVar

import httpx
from pydantic import BaseModel, SecretStr, ValidationError

from cobalt.shared.errors import (
    CobaltError,
    Conflict,
    Forbidden,
    InvalidInput,
    NotFound,
    Overloaded,
    PayloadTooLarge,
    Unauthorized,
    Unavailable,
    UpstreamError,
)

__all__ = [
    "AsyncServiceClient",
    "DEFAULT_BACKOFF_S",
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_RETRY",
    "MAX_BACKOFF_S",
    "MAX_RETRY_AFTER_S",
    "RetryPolicy",
    "STATUS_ERRORS",
    "ServiceClient",
    "error_envelope",
    "wait_until_ready",
]

logger = logging.getLogger(__name__)

DEFAULT_CONNECT_TIMEOUT_S = 5.0
"""Seconds to wait for a TCP connection; a live service accepts at once."""

DEFAULT_LIMITS = httpx.Limits(max_connections=64, max_keepalive_connections=16)
"""Connection-pool size of a client built here (requests in flight at once)."""

DEFAULT_MAX_RETRIES = 4
"""Attempts after the first one before giving up (so 5 attempts in all)."""

DEFAULT_BACKOFF_S = 0.5
"""Seconds before the first retry; doubled on each further retry, then jittered."""

MAX_BACKOFF_S = 8.0
"""Ceiling, in seconds, of one backoff delay."""

MAX_RETRY_AFTER_S = 60.0
"""Ceiling, in seconds, on how long a Retry-After header can make us wait."""

STATUS_ERRORS: dict[int, type[CobaltError]] = {
    400: InvalidInput,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidInput,
    503: Unavailable,
}
"""The error class of each status a Cobalt service answers on purpose (429: `Overloaded`)."""

_NOT_DONE_STATUSES = frozenset({429, 503})
"""Statuses with which our services refuse work before doing any: safe to send again."""

_GATEWAY_STATUSES = frozenset({502, 504})
"""A proxy's answers: the service may have done the work, so only idempotent calls retry."""

_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
"""Transport errors raised before any byte of the request left: always safe to retry."""

_MAYBE_SENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
"""Transport errors that may pass, after the request may have arrived."""

_Model = TypeVar("_Model", bound=BaseModel)
_HttpClient = TypeVar("_HttpClient", httpx.Client, httpx.AsyncClient)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a client waits before sending a failed call again."""

    max_retries: int = DEFAULT_MAX_RETRIES
    """Attempts after the first one; 0 disables retries."""
    backoff_s: float = DEFAULT_BACKOFF_S
    """Seconds before the first retry without Retry-After; doubled on each further one."""
    max_backoff_s: float = MAX_BACKOFF_S
    """Ceiling of one backoff delay."""
    max_retry_after_s: float = MAX_RETRY_AFTER_S
    """Ceiling on what a Retry-After header can make us wait."""

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError(f"max_retries must be 0 or more, got {self.max_retries}")
        if self.backoff_s < 0 or self.max_backoff_s < 0 or self.max_retry_after_s < 0:
            raise ValueError("backoff and Retry-After ceilings must be 0 or more seconds")

    def backoff(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (0-based) when the server names none."""
        ceiling = min(self.max_backoff_s, self.backoff_s * 2**retry)
        # "Equal jitter": callers that failed together spread out, and no delay is near zero.
        return random.uniform(ceiling / 2, ceiling)

    def retry_after(self, response: httpx.Response) -> float | None:
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
        return min(max(seconds, 0.0), self.max_retry_after_s)

    def delay(
        self, outcome: httpx.Response | httpx.TransportError, *, attempt: int, idempotent: bool
    ) -> float | None:
        """Seconds to wait before sending again after `outcome`, or None: do not retry.

        Args:
            outcome: What attempt number `attempt` (0-based) got.
            attempt: How many attempts came before this one.
            idempotent: Whether the call may run twice on the server without harm.
        """
        if attempt >= self.max_retries:
            return None
        if isinstance(outcome, httpx.TransportError):
            retryable = isinstance(outcome, _NEVER_SENT) or (
                idempotent and isinstance(outcome, _MAYBE_SENT)
            )
            return self.backoff(attempt) if retryable else None
        status = outcome.status_code
        if status in _NOT_DONE_STATUSES or (idempotent and status in _GATEWAY_STATUSES):
            waited = self.retry_after(outcome)
            return waited if waited is not None else self.backoff(attempt)
        return None


DEFAULT_RETRY = RetryPolicy()
"""The retry policy of every client unless one is passed."""


def error_envelope(response: httpx.Response) -> tuple[str, Any]:
    """The message and detail of `{"error": {"message": ...}}`, or a summary of another body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"]:
        return error["message"], error.get("detail")
    text = response.text.strip()
    summary = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
    return (f"{summary}: {text[:300]}" if text else summary), None


def _attempts(count: int) -> str:
    return f"{count} attempt{'s' if count != 1 else ''}"


def _auth_headers(token: str | SecretStr | None) -> dict[str, str]:
    if isinstance(token, SecretStr):
        token = token.get_secret_value()
    return {"Authorization": f"Bearer {token}"} if token else {}


class _ClientCore:
    """What both client kinds share: the service's name, auth, policy and error mapping."""

    service: ClassVar[str] = "service"
    """What the service is called in messages ("executor", "orchestrator")."""
    start_hint: ClassVar[str] = "check that it is running"
    """What to check when it cannot be reached."""
    default_timeout_s: ClassVar[float] = 60.0
    """Seconds to wait for one response when no timeout is passed."""

    _auth: dict[str, str]
    _owns_client: bool
    retry: RetryPolicy

    def _setup(
        self,
        client_class: type[_HttpClient],
        *,
        client: object | None,
        base_url: str | None,
        token: str | SecretStr | None,
        timeout: float | httpx.Timeout | None,
        limits: httpx.Limits,
        transport: Any,
        retry: RetryPolicy,
    ) -> _HttpClient:
        """Check the arguments and return the injected client or one built from them."""
        if client is None and not base_url:
            raise ValueError(
                f"pass base_url= (e.g. 'http://127.0.0.1:8100') or an httpx client= to reach "
                f"the {self.service} with"
            )
        built_args = base_url or timeout is not None or transport is not None
        if client is not None and (built_args or limits is not DEFAULT_LIMITS):
            raise ValueError(
                "pass either client= or base_url=/timeout=/limits=/transport= (to build one), "
                "not both: configure the injected client itself"
            )
        if base_url:
            try:
                scheme = httpx.URL(base_url).scheme
            except httpx.InvalidURL as exc:
                raise ValueError(
                    f"{self.service} URL {base_url!r} is not a valid URL: {exc}"
                ) from exc
            if scheme not in ("http", "https"):
                raise ValueError(
                    f"{self.service} URL {base_url!r} must start with http:// or https:// "
                    "(e.g. http://127.0.0.1:8100)"
                )
        if client is not None and not isinstance(client, client_class):
            raise TypeError(
                f"client must be an {client_class.__qualname__}, not {type(client).__name__}"
            )
        self._auth = _auth_headers(token)
        self.retry = retry
        self._owns_client = client is None
        if client is not None:
            return client
        if not isinstance(timeout, httpx.Timeout):
            seconds = self.default_timeout_s if timeout is None else timeout
            timeout = httpx.Timeout(seconds, connect=min(seconds, DEFAULT_CONNECT_TIMEOUT_S))
        return client_class(
            base_url=(base_url or "").rstrip("/"),
            timeout=timeout,
            limits=limits,
            transport=transport,
        )

    @property
    def token(self) -> str | None:
        """The bearer token this client sends (to hand the same service to a worker)."""
        header = self._auth.get("Authorization")
        return header.removeprefix("Bearer ") if header else None

    def _request_parts(self, body: BaseModel | None) -> tuple[bytes | None, dict[str, str]]:
        content = body.model_dump_json().encode() if body is not None else None
        headers = {**self._auth, "Content-Type": "application/json"} if content else self._auth
        return content, headers

    def _judge(
        self,
        outcome: httpx.Response | httpx.TransportError,
        *,
        url: str,
        attempt: int,
        idempotent: bool,
    ) -> httpx.Response | float:
        """A successful response, seconds to wait before sending again, or raise.

        Raises:
            CobaltError: the attempt failed and may not (or may no longer) be retried.
        """
        delay = self.retry.delay(outcome, attempt=attempt, idempotent=idempotent)
        if delay is not None:
            reason = (
                type(outcome).__name__
                if isinstance(outcome, httpx.TransportError)
                else f"HTTP {outcome.status_code}"
            )
            logger.warning(
                "%s %s: %s; retry %d of %d in %.2fs",
                self.service,
                url,
                reason,
                attempt + 1,
                self.retry.max_retries,
                delay,
            )
            return delay
        if isinstance(outcome, httpx.TransportError):
            raise self._unreachable(outcome, url=url, attempts=attempt + 1) from outcome
        try:
            outcome.raise_for_status()
        except httpx.HTTPStatusError as exc:
            raise self._status_error(outcome, url=url, attempts=attempt + 1) from exc
        return outcome

    def _unreachable(self, exc: httpx.TransportError, *, url: str, attempts: int) -> Unavailable:
        return Unavailable(
            f"cannot reach the {self.service} at {url} ({type(exc).__name__}: "
            f"{str(exc) or 'no detail'}; {_attempts(attempts)}): {self.start_hint}"
        )

    def _status_error(self, response: httpx.Response, *, url: str, attempts: int) -> CobaltError:
        status = response.status_code
        message, detail = error_envelope(response)
        if status == 429:
            retry_after = self.retry.retry_after(response)
            return Overloaded(
                f"{message} (gave up after {_attempts(attempts)})",
                retry_after_s=retry_after if retry_after is not None else 1.0,
                detail=detail,
            )
        if status == 404:
            message = f"{message} ({url}); check that the URL points to a Cobalt {self.service}"
        error_class = STATUS_ERRORS.get(status)
        if error_class is not None:
            return error_class(message, detail=detail)
        tries = f" after {_attempts(attempts)}" if attempts > 1 else ""
        return UpstreamError(
            f"{self.service} at {url} answered {status}{tries}: {message}",
            status_code=status,
            detail=detail,
        )

    def _parse(self, response: httpx.Response, model: type[_Model]) -> _Model:
        """The body as `model`.

        Raises:
            UpstreamError: the body is not one.
        """
        try:
            return model.model_validate_json(response.content)
        except ValidationError as exc:
            raise UpstreamError(
                f"{self.service} at {response.request.url} answered {response.status_code} "
                f"with a body that is not a valid {model.__name__}; check that the URL points "
                f"to a Cobalt {self.service} of a compatible version",
                status_code=response.status_code,
            ) from exc


class ServiceClient(_ClientCore):
    """Blocking client of one Cobalt service; subclasses add one method per endpoint.

    Either wraps an injected `httpx.Client` (the caller keeps owning it: `close()` leaves it
    open) or builds one from `base_url`, `timeout`, `limits` and `transport`.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | SecretStr | None = None,
        timeout: float | httpx.Timeout | None = None,
        limits: httpx.Limits = DEFAULT_LIMITS,
        transport: httpx.BaseTransport | None = None,
        client: httpx.Client | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        """Build or wrap the HTTP client.

        Args:
            base_url: The service's root URL, for a client built here.
            token: Bearer token sent with every request (also with an injected client).
            timeout: Seconds, or an `httpx.Timeout`, for a client built here
                (default: the subclass's `default_timeout_s`, connect 5 s).
            limits: Connection-pool limits for a client built here.
            transport: An httpx transport for a client built here (tests pass
                `httpx.MockTransport`).
            client: An httpx client to use instead of building one; it keeps its own
                base URL, timeouts and transport, and the caller closes it.
            retry: When failed calls are sent again (`RetryPolicy`).
            sleep: Called with the seconds to wait between attempts (tests record them).

        Raises:
            ValueError: neither `base_url` nor `client` is given, both are, or the URL is
                not http(s).
        """
        self._client = self._setup(
            httpx.Client,
            client=client,
            base_url=base_url,
            token=token,
            timeout=timeout,
            limits=limits,
            transport=transport,
            retry=retry,
        )
        self._sleep = sleep

    @property
    def base_url(self) -> str:
        """The service's root URL."""
        return str(self._client.base_url)

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

    def _send(
        self, method: str, path: str, body: BaseModel | None = None, *, idempotent: bool = True
    ) -> httpx.Response:
        """Send one call, retrying as the policy says; a 2xx response or a `CobaltError`."""
        content, headers = self._request_parts(body)
        url = str(self._client.base_url).rstrip("/") + path
        attempt = 0
        while True:
            try:
                outcome: httpx.Response | httpx.TransportError = self._client.request(
                    method, path, content=content, headers=headers
                )
            except httpx.TransportError as exc:
                outcome = exc
            result = self._judge(outcome, url=url, attempt=attempt, idempotent=idempotent)
            if isinstance(result, httpx.Response):
                return result
            self._sleep(result)
            attempt += 1

    def _probe(self, path: str) -> bool:
        """Whether `GET path` answers 200. One try; never raises."""
        try:
            response = self._client.get(path, headers=self._auth)
        except httpx.TransportError:
            return False
        return response.status_code == 200


class AsyncServiceClient(_ClientCore):
    """Asyncio client of one Cobalt service; the same arguments as `ServiceClient`.

    `transport` and `client` are the async httpx kinds (tests pass `httpx.MockTransport`
    or `httpx.ASGITransport`), and `sleep` is awaited between attempts.
    """

    def __init__(
        self,
        base_url: str | None = None,
        *,
        token: str | SecretStr | None = None,
        timeout: float | httpx.Timeout | None = None,
        limits: httpx.Limits = DEFAULT_LIMITS,
        transport: httpx.AsyncBaseTransport | None = None,
        client: httpx.AsyncClient | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._client = self._setup(
            httpx.AsyncClient,
            client=client,
            base_url=base_url,
            token=token,
            timeout=timeout,
            limits=limits,
            transport=transport,
            retry=retry,
        )
        self._sleep = sleep

    @property
    def base_url(self) -> str:
        """The service's root URL."""
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

    async def _send(
        self, method: str, path: str, body: BaseModel | None = None, *, idempotent: bool = True
    ) -> httpx.Response:
        """Send one call, retrying as the policy says; a 2xx response or a `CobaltError`."""
        content, headers = self._request_parts(body)
        url = str(self._client.base_url).rstrip("/") + path
        attempt = 0
        while True:
            try:
                outcome: httpx.Response | httpx.TransportError = await self._client.request(
                    method, path, content=content, headers=headers
                )
            except httpx.TransportError as exc:
                outcome = exc
            result = self._judge(outcome, url=url, attempt=attempt, idempotent=idempotent)
            if isinstance(result, httpx.Response):
                return result
            await self._sleep(result)
            attempt += 1

    async def _probe(self, path: str) -> bool:
        """Whether `GET path` answers 200. One try; never raises."""
        try:
            response = await self._client.get(path, headers=self._auth)
        except httpx.TransportError:
            return False
        return response.status_code == 200


def wait_until_ready(
    url: str,
    *,
    timeout_s: float,
    is_alive: Callable[[], bool] = lambda: True,
    on_tick: Callable[[float], None] | None = None,
    interval_s: float = 0.5,
    headers: dict[str, str] | None = None,
) -> float:
    """Poll `GET url` until it answers 200, for a service process that is starting.

    Args:
        url: The readiness URL (e.g. http://127.0.0.1:8100/readyz).
        timeout_s: Seconds to wait in all.
        is_alive: Whether the process is still there; polling stops at once when not.
        on_tick: Called with the seconds waited after each probe that was not ready.
        interval_s: Seconds between probes.
        headers: Sent with every probe (a bearer token).

    Returns:
        The seconds waited.

    Raises:
        Unavailable: the process is gone (`is_alive()` turned false), or `url` did not
            answer 200 within `timeout_s`; callers add what they know (the log's tail).
    """
    started = time.monotonic()
    with httpx.Client(timeout=httpx.Timeout(5.0), headers=headers or {}) as client:
        while True:
            if not is_alive():
                raise Unavailable(f"the process behind {url} exited while starting")
            try:
                if client.get(url).status_code == 200:
                    return time.monotonic() - started
            except httpx.TransportError:
                pass
            waited = time.monotonic() - started
            if waited > timeout_s:
                raise Unavailable(f"{url} did not answer 200 within {timeout_s:g} s")
            if on_tick is not None:
                on_tick(waited)
            time.sleep(interval_s)
