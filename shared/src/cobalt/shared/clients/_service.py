"""What Cobalt's blocking JSON-service clients share: one httpx.Client, closed with them."""

from __future__ import annotations

from types import TracebackType
from typing import Self

import httpx

__all__ = ["ServiceClient"]


class ServiceClient:
    """Owns an httpx.Client for one service root; a context manager that closes it."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._client = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers or {},
            timeout=httpx.Timeout(timeout_s, connect=5.0),
            transport=transport,
        )

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()
