"""How many connections the server takes at once, from its file-descriptor limit.

Every connection holds a descriptor, and so does every running test (its five pipes,
both ends until the jail has its own, the jail's control socket) and the server's own
machinery (sandbox slots, body-parser processes, logs). Without a bound, enough idle or
slow anonymous connections (a download of the docs' assets, a health probe left open)
take every descriptor of a low-fd executor, and its tests then fail for want of a pipe.
Past the bound uvicorn answers a new connection 503 and closes it at once.
"""

from __future__ import annotations

import resource

__all__ = ["FDS_PER_SLOT", "RESERVED_FDS", "connection_limit"]

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
