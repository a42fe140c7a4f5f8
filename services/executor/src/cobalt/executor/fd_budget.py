"""How many connections the server takes at once, from its file-descriptor limit.

Every connection holds a descriptor, and so does every running test (its five pipes,
both ends until the jail has its own, the jail's control socket) and the server's own
machinery (sandbox slots, body-parser processes, logs). Without a bound, enough idle or
slow anonymous connections (a download of the docs' assets, a health probe left open)
take every descriptor of a low-fd executor, and its tests then fail for want of a pipe.
Past the bound a new connection is answered 503 and closed as soon as it is accepted
(`refusing_connections_past`): uvicorn's own `limit_concurrency` refuses only a request,
and a connection that sends none held its descriptor until the header deadline, so 1,470
of them still took every descriptor of a 512-fd executor.
"""

from __future__ import annotations

import json
import resource
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["FDS_PER_SLOT", "RESERVED_FDS", "connection_limit", "refusing_connections_past"]

RESERVED_FDS = 64
"""Descriptors the server keeps for itself whatever the slots: listening socket, logs,
body-parser processes, the interpreter's own."""
FDS_PER_SLOT = 16
"""Descriptors one slot holds while it runs a test: ten pipe ends, the control socket,
cgroup files, the jail process's pidfd."""
MIN_CONNECTIONS = 8


def connection_limit(slots: int, nofile: int | None = None) -> int | None:
    """Connections (and requests in progress) the server takes at once: what its
    descriptor limit `nofile` (default: this process's soft RLIMIT_NOFILE) leaves after
    its slots and itself, at least `MIN_CONNECTIONS`; None when the limit is infinite."""
    if nofile is None:
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if nofile == resource.RLIM_INFINITY:
        return None
    return max(MIN_CONNECTIONS, nofile - RESERVED_FDS - FDS_PER_SLOT * slots)


_BUSY_BODY = json.dumps(
    {
        "error": {
            "type": "too_many_connections",
            "message": "the executor holds as many connections as its file descriptors "
            "allow; retry shortly",
        }
    }
).encode()
BUSY_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
    b"retry-after: 1\r\nconnection: close\r\n"
    + f"content-length: {len(_BUSY_BODY)}\r\n\r\n".encode()
    + _BUSY_BODY
)
"""What a connection past the limit gets before it is closed, whatever it sends."""


def refusing_connections_past(protocol: type[H11Protocol], limit: int | None) -> type[H11Protocol]:
    """`protocol` (uvicorn's h11 protocol or a subclass) closing each connection accepted
    while `limit` others are open, with `BUSY_RESPONSE`: the open connections, and so the
    descriptors they hold, never pass `limit` (None: no limit)."""
    if limit is None:
        return protocol
    most = limit

    class RefusingProtocol(protocol):  # type: ignore[valid-type,misc]
        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            # `connections` holds this one too (added by uvicorn above).
            if len(self.connections) > most:
                transport.write(BUSY_RESPONSE)
                transport.close()

    return RefusingProtocol
