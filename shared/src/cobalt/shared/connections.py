"""Connection hygiene for every Cobalt HTTP server: no client holds a connection or a
request open indefinitely.

Slowloris clients open connections and send headers or a body a byte at a time. uvicorn
closes idle keep-alive connections, but resets that timer on every byte and has no limit
on how long a request's headers may take. Here a connection must deliver a complete
request head within `header_timeout_s` of opening (or of its last response), and each
piece of a body must arrive within `body_timeout_s` (408 otherwise).
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from cobalt.shared.errors import BodyTimeout
from cobalt.shared.http import error_response

__all__ = ["BodyDeadline", "header_deadline_protocol"]


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


class _Late(Exception):
    """A body piece did not arrive in time."""


class BodyDeadline:
    """ASGI middleware: each piece of a request body must arrive within `timeout_s`."""

    def __init__(self, app: ASGIApp, *, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_done = False
        response_started = False

        async def timed_receive() -> Message:
            nonlocal body_done
            if body_done:
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), self.timeout_s)
            except TimeoutError as exc:
                raise _Late from exc
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal response_started
            response_started = response_started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, timed_receive, tracked_send)
        except _Late:
            if response_started:
                raise
            message = f"no request body data for {self.timeout_s:g} s; send the body promptly"
            response = error_response(
                408, BodyTimeout.error_type, message, headers={"Connection": "close"}
            )
            await response(scope, receive, send)
