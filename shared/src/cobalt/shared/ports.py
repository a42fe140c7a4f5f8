"""A free TCP port for a process about to listen on it.

`free_port()` asks the kernel for an ephemeral port by binding port 0 and closes the probe
at once, so the port is free when asked, not reserved: another process may take it before
the caller binds. That race is acceptable where this is used (tests, the demo, local
launches of the executor and of vLLM), because the caller binds soon after and a lost race
fails loudly (the server cannot bind and exits) rather than silently. Where the caller can
hand a bound socket to its server instead (uvicorn's `sockets=`), that has no race at all.
"""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on at `host` right now (the address the caller will bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port
