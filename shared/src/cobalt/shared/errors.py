"""The one error tree of Cobalt.

    CobaltError
     ├── NotFound          a named thing does not exist                  -> 404
     ├── Conflict          the request clashes with the current state    -> 409
     ├── InvalidInput      the caller sent something we cannot use        -> 422
     │    ├── LimitTooHigh      a limit above an executor's maximum       -> 422
     │    ├── PayloadTooLarge   the request body is over the size cap     -> 413
     │    └── BodyTimeout       the request body did not arrive in time   -> 408
     ├── Unauthorized      missing or wrong credentials                   -> 401
     ├── Forbidden         right credentials, not allowed to do this      -> 403
     ├── Overloaded        too much work queued; retry later              -> 429
     ├── Unavailable       a dependency of ours is down or not ready      -> 503
     └── UpstreamError     a service we called answered with an error     -> 502

Services add leaves in their own `errors.py`. Each HTTP app maps these classes to
statuses in one place (`cobalt.shared.http.install_error_handlers`), and clients turn
transport failures back into `Unavailable` / `UpstreamError` so callers see one tree.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

__all__ = [
    "BodyTimeout",
    "CobaltError",
    "Conflict",
    "Forbidden",
    "InvalidInput",
    "LimitTooHigh",
    "NotFound",
    "Overloaded",
    "PayloadTooLarge",
    "Unauthorized",
    "Unavailable",
    "UpstreamError",
    "first_validation_error",
    "first_validation_error_parts",
]


class CobaltError(Exception):
    """Base of every error Cobalt raises on purpose."""

    status_code = 500
    error_type = "internal_error"

    def __init__(self, message: str, *, detail: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class NotFound(CobaltError):
    """A named thing (run, dataset, job) does not exist."""

    status_code = 404
    error_type = "not_found"


class Conflict(CobaltError):
    """The request clashes with the current state of a resource."""

    status_code = 409
    error_type = "conflict"


class InvalidInput(CobaltError):
    """The caller sent something that cannot be used as it is."""

    status_code = 422
    error_type = "invalid_input"


class LimitTooHigh(InvalidInput):
    """A requested limit is above what the executor allows (its `max_limits`)."""

    error_type = "limit_too_high"


class PayloadTooLarge(InvalidInput):
    """The request body is larger than the service accepts."""

    status_code = 413
    error_type = "payload_too_large"


class BodyTimeout(InvalidInput):
    """The client did not send its request body in time."""

    status_code = 408
    error_type = "body_timeout"


class Unauthorized(CobaltError):
    """Missing or wrong credentials."""

    status_code = 401
    error_type = "unauthorized"


class Forbidden(CobaltError):
    """Valid credentials that do not allow this request (a read-only token on a write)."""

    status_code = 403
    error_type = "forbidden"


class Overloaded(CobaltError):
    """More work is queued than the service holds; retry after `retry_after_s`."""

    status_code = 429
    error_type = "overloaded"

    def __init__(self, message: str, *, retry_after_s: float = 1.0, detail: Any = None) -> None:
        super().__init__(message, detail=detail)
        self.retry_after_s = retry_after_s


class Unavailable(CobaltError):
    """A dependency is down, unreachable or not ready yet."""

    status_code = 503
    error_type = "unavailable"


class UpstreamError(CobaltError):
    """A service we called answered with an error we cannot fix by retrying."""

    status_code = 502
    error_type = "upstream_error"

    def __init__(self, message: str, *, status_code: int | None = None, detail: Any = None) -> None:
        super().__init__(message, detail=detail)
        self.upstream_status = status_code


def first_validation_error(
    exc: ValidationError, *, where: str = "value", count_others: bool = False
) -> str:
    """The first error of a pydantic validation as `field.path: message`.

    Args:
        where: What to name when the error is not inside a field.
        count_others: Add "(and N more)" when there are more errors.
    """
    place, message = first_validation_error_parts(exc, where=where)
    others = len(exc.errors()) - 1
    more = f" (and {others} more)" if count_others and others else ""
    return f"{place}: {message}{more}"


def first_validation_error_parts(exc: ValidationError, *, where: str = "value") -> tuple[str, str]:
    """Where the first error of a pydantic validation is (dotted) and what it says (a
    validator's own message without pydantic's "Value error, " in front)."""
    first = exc.errors()[0]
    place = ".".join(str(part) for part in first.get("loc", ())) or where
    return place, str(first.get("msg", "invalid")).removeprefix("Value error, ")
