"""One error-to-HTTP mapping and one error envelope for every Cobalt FastAPI app.

Every error leaves as `{"error": {"type", "message", "detail"}}` with the status of its
class in `cobalt.shared.errors`; FastAPI's validation errors and Starlette's HTTP errors
are reshaped into the same envelope so clients parse one format. A service whose libraries
raise their own errors (the orchestrator's database) passes a translation into the
`CobaltError` tree here, so the mapping to statuses stays in this one place.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Message, Receive

from cobalt.shared.errors import (
    CobaltError,
    InvalidInput,
    Overloaded,
    Unauthorized,
)

__all__ = [
    "ErrorEnvelope",
    "Translation",
    "document_error_responses",
    "error_response",
    "install_error_handlers",
    "validation_detail",
    "replaying",
]

Translation = Callable[[Exception], CobaltError]
"""Turns a library's exception into the `CobaltError` that says what it means for the caller."""


class ErrorBody(BaseModel):
    type: str = Field(description="machine-readable kind, e.g. not_found, invalid_input")
    message: str = Field(description="what went wrong and what to do about it")
    detail: Any = Field(default=None, description="per-field errors of a validation, or null")


class ErrorEnvelope(BaseModel):
    """Every error response of every Cobalt service."""

    error: ErrorBody


logger = logging.getLogger(__name__)


def error_response(
    status: int,
    error_type: str,
    message: str,
    detail: Any = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """The error envelope as a response."""
    body = {"error": {"type": error_type, "message": message, "detail": detail}}
    return JSONResponse(body, status_code=status, headers=headers)


VALIDATION_ERRORS_SHOWN = 20
"""Validation errors listed in a 422's detail; a body with a million bad items gets the
first ones, not a response (and a list in memory) the size of the body."""
_LOC_PART_CHARS = 200


def validation_detail(errors: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The first validation errors as `{loc, msg, type}`: the offending input is dropped
    (it may be a whole program or megabytes), and so are long keys in a location."""
    shown: list[dict[str, Any]] = []
    for err in errors:
        if len(shown) == VALIDATION_ERRORS_SHOWN:
            break
        loc = [
            part if not isinstance(part, str) else part[:_LOC_PART_CHARS]
            for part in err.get("loc", ())
        ]
        shown.append(
            {
                "loc": loc,
                "msg": str(err.get("msg", "")).removeprefix("Value error, ")[:1000],
                "type": err.get("type", ""),
            }
        )
    return shown


def _cobalt_response(request: Request, exc: CobaltError) -> JSONResponse:
    headers = None
    if isinstance(exc, Overloaded):
        headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
    if isinstance(exc, Unauthorized):
        headers = {"WWW-Authenticate": "Bearer"}
    if exc.status_code >= 500:
        logger.warning("%s %s -> %s: %s", request.method, request.url.path, exc.status_code, exc)
    return error_response(exc.status_code, exc.error_type, exc.message, exc.detail, headers)


BODY_NOT_PARSED = "There was an error parsing the body"
"""FastAPI's 400 for a body it could not decode at all (not UTF-8, say); answered as the
422 that every other malformed body gets."""


def install_error_handlers(
    app: FastAPI, translations: Mapping[type[Exception], Translation] | None = None
) -> None:
    """Register the handlers that turn every error into the envelope.

    Args:
        translations: Library exceptions (by class, subclasses included) and how each
            becomes a `CobaltError`; whatever is not translated and not a `CobaltError`
            is a bug and answers 500.
    """

    @app.exception_handler(CobaltError)
    async def _cobalt_error(request: Request, exc: CobaltError) -> JSONResponse:
        return _cobalt_response(request, exc)

    for exception_class, translate in (translations or {}).items():

        async def _translated(
            request: Request, exc: Exception, translate: Translation = translate
        ) -> JSONResponse:
            return _cobalt_response(request, translate(exc))

        app.add_exception_handler(exception_class, _translated)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = validation_detail(exc.errors())
        first = detail[0] if detail else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(part) for part in first["loc"] if part != "body") or "body"
        return error_response(422, "invalid_input", f"{where}: {first['msg']}", detail)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and exc.detail == BODY_NOT_PARSED:
            not_json = InvalidInput("the request body is not valid JSON (or not UTF-8)")
            return _cobalt_response(request, not_json)
        # A refused body (`cobalt.shared.connections.BodyRefused`) names its own type.
        kind = getattr(exc, "error_type", None) or {
            401: "unauthorized",
            404: "not_found",
            405: "method_not_allowed",
        }.get(exc.status_code, "http_error")
        headers = dict(exc.headers) if exc.headers else None
        return error_response(exc.status_code, kind, str(exc.detail), None, headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error", "internal server error; see the server log")


ERROR_STATUSES = {
    401: "missing or wrong bearer token",
    403: "the token does not allow this request (a read-only token on a write)",
    404: "a named thing does not exist",
    408: "the request body did not arrive in time",
    409: "the request clashes with the current state",
    413: "the request body is over the size cap",
    422: "the request is malformed or a value is out of range",
    429: "too much work queued; retry after Retry-After seconds",
    502: "a service this one called answered with an error",
    503: "a dependency is down or not ready; retry",
}
"""What each error status means, for the OpenAPI document."""

_FASTAPI_VALIDATION_SCHEMAS = ("HTTPValidationError", "ValidationError")


def document_error_responses(app: FastAPI, statuses: Callable[[str, str], Iterable[int]]) -> None:
    """Make `app.openapi()` declare the error responses the server really sends.

    Each operation gets the statuses `statuses(path, method)` names, each with the error
    envelope as its body; FastAPI's own 422 body (`{"detail": [...]}`), which the
    handlers above never send, is replaced by the envelope.
    """
    build = app.openapi
    envelope_ref = {"$ref": f"#/components/schemas/{ErrorEnvelope.__name__}"}

    def openapi() -> dict[str, Any]:
        spec = build()
        components = spec.setdefault("components", {}).setdefault("schemas", {})
        schema = ErrorEnvelope.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(schema.pop("$defs", {}))
        components[ErrorEnvelope.__name__] = schema
        for name in _FASTAPI_VALIDATION_SCHEMAS:
            components.pop(name, None)
        for path, operations in spec.get("paths", {}).items():
            for method, operation in operations.items():
                responses = operation.setdefault("responses", {})
                declared = set(statuses(path, method.upper()))
                if "422" in responses:
                    declared.add(422)
                for status in sorted(declared):
                    responses[str(status)] = {
                        "description": ERROR_STATUSES[status],
                        "content": {"application/json": {"schema": envelope_ref}},
                    }
        return spec

    app.openapi = openapi  # type: ignore[method-assign]


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands on `body` (read whole by a middleware) as one message, then
    whatever comes next (a disconnect) from the real one."""
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
