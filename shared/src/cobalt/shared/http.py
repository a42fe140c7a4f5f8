"""One error-to-HTTP mapping and one error envelope for every Cobalt FastAPI app.

Every error leaves as `{"error": {"type", "message", "detail"}}` with the status of its
class in `cobalt.shared.errors`; FastAPI's validation errors and Starlette's HTTP errors
are reshaped into the same envelope so clients parse one format.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cobalt.shared.errors import CobaltError, Overloaded, PayloadTooLarge

__all__ = ["BodySizeLimit", "error_response", "install_error_handlers"]

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


def _validation_detail(exc: RequestValidationError) -> list[dict[str, Any]]:
    # Drop the offending input from each error: it may be a whole program or megabytes.
    return [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors()
    ]


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that turn every error into the envelope."""

    @app.exception_handler(CobaltError)
    async def _cobalt_error(request: Request, exc: CobaltError) -> JSONResponse:
        headers = None
        if isinstance(exc, Overloaded):
            headers = {"Retry-After": str(max(1, math.ceil(exc.retry_after_s)))}
        if exc.status_code >= 500:
            logger.warning(
                "%s %s -> %s: %s", request.method, request.url.path, exc.status_code, exc
            )
        return error_response(exc.status_code, exc.error_type, exc.message, exc.detail, headers)

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = _validation_detail(exc)
        first = detail[0] if detail else {"loc": [], "msg": "invalid request"}
        where = ".".join(str(part) for part in first["loc"] if part != "body") or "body"
        return error_response(422, "invalid_input", f"{where}: {first['msg']}", detail)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed"}.get(
            exc.status_code, "http_error"
        )
        headers = dict(exc.headers) if exc.headers else None
        return error_response(exc.status_code, kind, str(exc.detail), None, headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error on %s %s", request.method, request.url.path)
        return error_response(500, "internal_error", "internal server error; see the server log")


class BodySizeLimit:
    """ASGI middleware: refuse bodies over `max_bytes` with 413, without reading them whole.

    A declared Content-Length over the cap is refused before any byte is read; a chunked
    body is read up to the cap (refused once it passes it) and handed on in one piece.
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(scope, receive, send)
            return
        if declared is not None:
            await self.app(scope, receive, send)
            return
        # No declared length (chunked): read the body here, up to the cap, then replay it.
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            seen += len(chunks[-1])
            if seen > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _message(self) -> str:
        return (
            f"request body is larger than {self.max_bytes} bytes; split the work into "
            "several requests (or raise the server's body-size setting)"
        )

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(413, PayloadTooLarge.error_type, self._message())
        await response(scope, receive, send)
