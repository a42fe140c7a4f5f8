"""A real HTTP server that answers from a script, for testing clients' retries over TCP.

Each request takes the next reply: a status with an optional JSON body and headers, or
`DROP` (the connection closes after the request is read, with no response). Every
request's method and path is recorded, so tests count attempts on the server's side.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """One scripted answer."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


DROP = Reply(status=0)
"""Read the request, then close the connection without answering."""


def error_reply(status: int, message: str, **headers: str) -> Reply:
    """A reply with Cobalt's error envelope."""
    body = {"error": {"type": "scripted", "message": message, "detail": None}}
    return Reply(status, body, {key.replace("_", "-"): value for key, value in headers.items()})


@dataclass
class ScriptedServer:
    """The URL of a running scripted server and what it was asked."""

    url: str
    replies: list[Reply]
    requests: list[tuple[str, str]] = field(default_factory=list)


@contextmanager
def scripted_server(*replies: Reply) -> Iterator[ScriptedServer]:
    """A threaded HTTP server on a free localhost port, answering `replies` in order.

    A request after the last reply gets 500, so a client that sends too many fails loudly.
    """
    state = ScriptedServer(url="", replies=list(replies))
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            with lock:
                state.requests.append((self.command, self.path))
                reply = state.replies.pop(0) if state.replies else Reply(500, {"error": {}})
            if reply is DROP:
                self.close_connection = True
                return
            payload = b"" if reply.body is None else json.dumps(reply.body).encode()
            self.send_response(reply.status)
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        do_GET = _answer
        do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=30)
