"""Reading responses of Cobalt services and of vLLM (they share one error envelope).

`raise_for_error` turns a failed response into the shared error tree (404 -> NotFound,
409 -> Conflict, ...), and `parse_contract` reads a body as a contract, so every client of
a Cobalt JSON API maps errors the same way.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from cobalt.shared.errors import (
    CobaltError,
    Conflict,
    InvalidInput,
    NotFound,
    Unauthorized,
    Unavailable,
    UpstreamError,
)

__all__ = ["error_envelope", "parse_contract", "raise_for_error"]

_Model = TypeVar("_Model", bound=BaseModel)

STATUS_ERRORS: dict[int, type[CobaltError]] = {
    400: InvalidInput,
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    413: InvalidInput,
    422: InvalidInput,
    503: Unavailable,
}
"""The error class of each status a Cobalt service answers on purpose."""


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


def raise_for_error(response: httpx.Response, *, not_found_hint: str = "") -> None:
    """Raise the shared error for a failed response; return for a successful one.

    Raises:
        CobaltError: the class `STATUS_ERRORS` maps the status to, with the service's own
            message; `UpstreamError` for any other failure status.
    """
    if response.is_success:
        return
    message, detail = error_envelope(response)
    url = str(response.request.url)
    if response.status_code == 404 and not_found_hint:
        message += f" ({url}); {not_found_hint}"
    error_class = STATUS_ERRORS.get(response.status_code)
    if error_class is not None:
        raise error_class(message, detail=detail)
    raise UpstreamError(
        f"{url} answered {response.status_code}: {message}",
        status_code=response.status_code,
        detail=detail,
    )


def parse_contract(response: httpx.Response, model: type[_Model]) -> _Model:
    """The body as `model`.

    Raises:
        UpstreamError: the body is not one.
    """
    try:
        return model.model_validate_json(response.content)
    except ValidationError as exc:
        raise UpstreamError(
            f"{response.request.url} answered a body that is not a {model.__name__}",
            status_code=response.status_code,
        ) from exc
