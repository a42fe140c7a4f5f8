"""Every 4xx the executor sends is logged with its reason and counted by kind.

Clients of other judges (verl, tinker-cookbook, SkyRL) score any 4xx as a failed program,
so a refusal is a reward of 0 that only the server can explain. One ASGI middleware,
outside every other, sees every response (the body guard's 413/408, the routes' errors,
404 and 405 for paths and methods no route has), reads the error envelope's `type` and
`message`, logs them and counts them in `cobalt_executor_client_errors` by route template,
status and type. The route is the template (`/t/{token}/run_code`), and an unmatched
path is logged with any token in it hidden, so no token reaches a log or a label.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cobalt.executor.api.deps import PATH_TOKEN_PREFIX

__all__ = ["ClientErrorLog", "hide_path_tokens_in_access_log", "redact_path"]

logger = logging.getLogger(__name__)

ERROR_BODY_BYTES = 16 << 10
"""How much of an error response is kept to read its envelope (envelopes are small)."""
UNROUTED = "unrouted"
"""The route label of a response no route gave: a path no route has, or a body the guard
refused before routing (its log line has the path)."""
_PATH_TOKEN = re.compile(r"^/t/[^/]*")
_LOGGED_PATH_CHARS = 200


def redact_path(path: str) -> str:
    """`path` with the token of a `/t/<token>/...` path replaced by `***`, shortened."""
    return _PATH_TOKEN.sub("/t/***", path)[:_LOGGED_PATH_CHARS]


class ClientErrorLog:
    """ASGI middleware: logs and counts each 4xx response with its error type."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 0
        body = bytearray()

        async def watching_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            elif message["type"] == "http.response.body" and 400 <= status < 500:
                room = ERROR_BODY_BYTES - len(body)
                if room > 0:
                    body.extend(message.get("body", b"")[:room])
                if not message.get("more_body", False):
                    _record(scope, status, bytes(body))
            await send(message)

        await self.app(scope, receive, watching_send)


def _record(scope: Scope, status: int, body: bytes) -> None:
    error_type, message = _envelope(body)
    route = getattr(scope.get("route"), "path", None)
    if route is not None and "token" in scope.get("path_params", {}):
        route = PATH_TOKEN_PREFIX + route  # the route object is the one served at the root
    where = route or f"{UNROUTED} {redact_path(str(scope.get('path', '')))}"
    logger.info(
        "refused %s %s -> %d %s: %s", scope.get("method", ""), where, status, error_type, message
    )
    state = getattr(scope.get("app"), "state", None)
    service = getattr(state, "service", None)
    if service is not None:
        service.metrics.client_errors.labels(
            route=route or UNROUTED, status=str(status), type=error_type
        ).inc()


def _envelope(body: bytes) -> tuple[str, str]:
    """The error envelope's type and message (`http_error` and the text when the body is
    not an envelope)."""
    try:
        parsed: Any = json.loads(body)
        error = parsed["error"]
        return str(error["type"])[:64], str(error["message"])[:1000]
    except (ValueError, KeyError, TypeError):
        return "http_error", body[:200].decode("utf-8", "replace")


class _PathTokenFilter(logging.Filter):
    """Hides the token of a `/t/<token>/...` path in uvicorn's access log lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                _PATH_TOKEN.sub("/t/***", arg) if isinstance(arg, str) else arg
                for arg in record.args
            )
        return True


_ACCESS_FILTER = _PathTokenFilter()


def hide_path_tokens_in_access_log() -> None:
    """Install the filter on uvicorn's access logger, once per process."""
    access = logging.getLogger("uvicorn.access")
    if _ACCESS_FILTER not in access.filters:
        access.addFilter(_ACCESS_FILTER)
