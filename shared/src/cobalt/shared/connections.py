"""Connection hygiene for every Cobalt HTTP server: no client holds a connection or a
request open indefinitely.

Slowloris clients open connections and send headers or a body a byte at a time. uvicorn
closes idle keep-alive connections, but resets that timer on every byte and has no limit
on how long a request's headers may take. Here a connection must deliver a complete
request head within `header_timeout_s` of opening (or of its last response), and a body
must arrive whole within a total deadline, each piece within a shorter one (408
otherwise), and within a size cap (413), read only when a route asks for it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from cobalt.shared.errors import BodyTimeout, PayloadTooLarge
from cobalt.shared.http import error_response

__all__ = ["BodyRefused", "RequestBodyGuard", "header_deadline_protocol"]


def header_deadline_protocol(header_timeout_s: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing connections whose request head is late."""

    class HeaderDeadlineProtocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._deadline = self.loop.call_later(header_timeout_s, self._expire)

        def _expire(self) -> None:
            # A request whose head has arrived is running (its body has its own deadline).
            in_request = self.cycle is not None and not self.cycle.response_complete
            if not in_request and not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadlineProtocol


class BodyRefused(StarletteHTTPException):
    """A request body was cut off: too large (413) or too slow (408).

    An HTTP exception on purpose: FastAPI re-raises those from its own body reading (it
    turns any other exception there into a 400), so the app's handler answers it with the
    error envelope; `RequestBodyGuard` answers it itself when raised outside the app.
    """

    def __init__(self, status_code: int, error_type: str, message: str) -> None:
        super().__init__(status_code, message, headers={"Connection": "close"})
        self.error_type = error_type


class RequestBodyGuard:
    """ASGI middleware: every request body is bounded in size and in time, and is read
    only when a route asks for it.

    - A declared Content-Length over `max_bytes` is refused (413) before any byte is
      read; a chunked body is counted as the route reads it and cut once it passes.
    - Each piece must arrive within `piece_timeout_s`, and the whole body within
      `total_timeout_s` of the request's head (408): a body dripped a byte at a time is
      cut at the total deadline, not held open by each new byte.
    - Nothing is read ahead: a route whose dependencies refuse the request (a missing
      token) answers before the body is read, so an anonymous upload costs nothing. A
      response sent while a body is still unread closes the connection, so the server
      does not go on receiving (and discarding) it.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        piece_timeout_s: float,
        total_timeout_s: float | None = None,
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.piece_timeout_s = piece_timeout_s
        self.total_timeout_s = total_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", []))
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._answer(scope, receive, send, self._too_large())
            return
        has_body = (declared is not None and declared not in (b"", b"0")) or (
            b"transfer-encoding" in headers
        )
        loop = asyncio.get_running_loop()
        deadline = None if self.total_timeout_s is None else loop.time() + self.total_timeout_s
        body_done = not has_body
        seen = 0
        response_started = False

        async def guarded_receive() -> Message:
            nonlocal body_done, seen
            if body_done:
                return await receive()
            wait_s = self.piece_timeout_s
            if deadline is not None:
                wait_s = min(wait_s, deadline - loop.time())
            try:
                if wait_s <= 0:
                    raise TimeoutError
                message = await asyncio.wait_for(receive(), wait_s)
            except TimeoutError:
                raise self._late() from None
            if message["type"] != "http.request":
                body_done = True
                return message
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise self._too_large()
            if not message.get("more_body", False):
                body_done = True
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
                headers = list(message.get("headers", []))
                if not body_done and all(name.lower() != b"connection" for name, _ in headers):
                    message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        try:
            await self.app(scope, guarded_receive, guarded_send)
        except BodyRefused as refused:
            if response_started:
                raise
            await self._answer(scope, receive, send, refused)

    def _too_large(self) -> BodyRefused:
        return BodyRefused(
            413,
            PayloadTooLarge.error_type,
            f"request body is larger than {self.max_bytes} bytes; split the work into "
            "several requests (or raise the server's body-size setting)",
        )

    def _late(self) -> BodyRefused:
        if self.total_timeout_s is not None:
            window = (
                f"within {self.total_timeout_s:g} s (each piece within {self.piece_timeout_s:g} s)"
            )
        else:
            window = f"with no gap over {self.piece_timeout_s:g} s"
        return BodyRefused(
            408,
            BodyTimeout.error_type,
            f"the request body did not arrive {window}; send it promptly",
        )

    @staticmethod
    async def _answer(scope: Scope, receive: Receive, send: Send, refused: BodyRefused) -> None:
        response = error_response(
            refused.status_code,
            refused.error_type,
            str(refused.detail),
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)
