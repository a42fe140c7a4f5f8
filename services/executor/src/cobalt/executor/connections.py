"""Requests whose client went away: their work is cancelled, not run for nobody.

(Header and body deadlines, which every Cobalt server uses, are `cobalt.shared.connections`.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request

from cobalt.executor.errors import ClientDisconnected

__all__ = ["unless_disconnected"]

Result = TypeVar("Result")


async def unless_disconnected(request: Request, work: Coroutine[Any, Any, Result]) -> Result:
    """Await `work`, cancelling it if the client disconnects first (its tests not yet
    started are then dropped instead of running for nobody).

    Raises:
        ClientDisconnected: the client went away before the work was done.
    """
    task = asyncio.create_task(work)

    async def watch() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass
        task.cancel()

    watcher = asyncio.create_task(watch())
    try:
        return await task
    except asyncio.CancelledError:
        if watcher.done() and not watcher.cancelled():
            raise ClientDisconnected("the client disconnected; its tests were cancelled") from None
        raise
    finally:
        watcher.cancel()
