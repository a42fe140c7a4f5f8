"""The inference replicas of one job, named once and read by the trainer and the rollout
workers alike.

A replica list is a sequence of URLs (the trainer's control roots, or the workers' /v1
URLs). An entry written `dns+http://NAME:PORT/...` names a Kubernetes headless Service:
its host name is resolved now, and each address it has becomes one replica with the same
port and path. Resolving at every use (every publish, every routing refresh) is what makes
a replica that joined or left since the last step count: a headless Service's DNS answer
is its ready pods, and a replica that restarted comes back under a new address.

One plain URL is the default and the simple path: it stays one replica, unresolved.
"""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit, urlunsplit

__all__ = ["DNS_SCHEME_PREFIX", "Resolver", "expand_replicas", "split_replicas"]

DNS_SCHEME_PREFIX = "dns+"
"""`dns+http://name:port`: every address of `name` is one replica."""

Resolver = Callable[[str, int], list[str]]
"""(host, port) -> the addresses it resolves to."""


def _resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


def split_replicas(value: str) -> list[str]:
    """`http://a:8000, http://b:8000` -> its URLs, blanks dropped."""
    return [part.strip() for part in value.split(",") if part.strip()]


def expand_replicas(urls: Iterable[str], *, resolve: Resolver = _resolve) -> list[str]:
    """Every replica URL now: plain URLs as they are, `dns+` entries resolved to one URL
    per address (none when the name resolves to nothing: no replica is up).

    Raises:
        ValueError: a `dns+` entry without a host name.
    """
    expanded: list[str] = []
    for url in urls:
        if not url.startswith(DNS_SCHEME_PREFIX):
            expanded.append(url.rstrip("/"))
            continue
        parts = urlsplit(url.removeprefix(DNS_SCHEME_PREFIX))
        if not parts.hostname:
            raise ValueError(f"{url!r}: a dns+ replica URL needs a host name")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = resolve(parts.hostname, port)
        except OSError:
            addresses = []  # not resolvable now: no replica behind the name right now
        for address in addresses:
            host = f"[{address}]" if ":" in address else address
            expanded.append(urlunsplit(parts._replace(netloc=f"{host}:{port}")).rstrip("/"))
    return list(dict.fromkeys(expanded))
