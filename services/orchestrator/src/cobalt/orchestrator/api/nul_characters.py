"""No NUL character gets into the orchestrator: 422 at the door, for every route.

PostgreSQL text cannot hold U+0000, and no name, id, URL or setting the API takes has a
use for one, so a NUL anywhere in a request (its path, its query or a string of its JSON
body) is refused before any route runs, whatever route is added later. The body is read
here in full (the size cap in front of this bounds it) and handed on unchanged.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

from cobalt.shared.errors import InvalidInput
from cobalt.shared.http import error_response, replaying

__all__ = ["RejectNulCharacters", "has_json_nul"]

_JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
"""A `\\u0000` escape in JSON text: a backslash that is not itself escaped (preceded by an
even run of backslashes), then u0000. JSON cannot carry a raw NUL byte inside a string."""


def has_json_nul(body: bytes) -> bool:
    """Whether a JSON document holds a NUL character in one of its strings."""
    return b"\x00" in body or _JSON_NUL.search(body) is not None


class RejectNulCharacters:
    """ASGI middleware: 422 for a request with a NUL in its path, query or JSON body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if "\x00" in scope["path"] or b"%00" in scope.get("query_string", b""):
            await self._refuse(scope, receive, send, "the URL")
            return
        chunks: list[bytes] = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if has_json_nul(body):
            await self._refuse(scope, receive, send, "the request body")
            return
        await self.app(scope, replaying(body, receive), send)

    @staticmethod
    async def _refuse(scope: Scope, receive: Receive, send: Send, where: str) -> None:
        message = f"{where} holds a NUL character (U+0000), which no field accepts"
        response = error_response(422, InvalidInput.error_type, message)
        await response(scope, receive, send)
