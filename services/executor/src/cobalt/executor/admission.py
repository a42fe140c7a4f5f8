"""Admission control: how much work the executor holds at once, counted in tests and bytes.

A request is refused (429 with Retry-After) only when the work already held fills the
queue when it arrives. Once accepted, its programs are admitted one at a time as room
frees up, so a batch larger than the queue (evaluation sends 32 programs per call) runs
in pieces on an idle server instead of being refused forever. A program larger than the
whole queue is admitted alone. Everything here runs on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from cobalt.shared.errors import Overloaded

__all__ = ["Admission"]

SECONDS_PER_QUEUED_TEST = 0.05
"""Rough drain time of one queued test per slot, for the Retry-After hint."""


class Admission:
    """Counts the tests and request bytes queued or running."""

    def __init__(self, *, max_tests: int, max_bytes: int, slots: int) -> None:
        self.max_tests = max_tests
        self.max_bytes = max_bytes
        self.slots = slots
        self.tests = 0
        self.bytes = 0
        self._waiters: list[asyncio.Future[None]] = []

    def has_room(self) -> bool:
        """Whether new work would be taken now (the queue is not full)."""
        return self.tests < self.max_tests and self.bytes < self.max_bytes

    async def wait_for_room(self) -> None:
        """Return once the queue has room (`has_room`); woken as held work ends."""
        await self._wait_until(self.has_room)

    async def _wait_until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            waiter = asyncio.get_running_loop().create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def check_room(self) -> None:
        """Refuse new work at once when the queue is already full.

        Raises:
            Overloaded: the tests or bytes held fill the queue.
        """
        if not self.has_room():
            backlog_s = self.tests / max(self.slots, 1) * SECONDS_PER_QUEUED_TEST
            raise Overloaded(
                f"executor queue is full ({self.tests} tests and {self.bytes} bytes held, "
                f"limits {self.max_tests} and {self.max_bytes}); retry later",
                retry_after_s=max(1.0, round(backlog_s, 1)),
            )

    def _fits(self, tests: int, nbytes: int) -> bool:
        if self.tests == 0 and self.bytes == 0:
            return True  # larger than the whole queue: runs alone
        return self.tests + tests <= self.max_tests and self.bytes + nbytes <= self.max_bytes

    @asynccontextmanager
    async def admitted(self, tests: int, nbytes: int) -> AsyncIterator[None]:
        """Hold room for one program's `tests` and `nbytes`, waiting until it fits."""
        await self._wait_until(lambda: self._fits(tests, nbytes))
        self.tests += tests
        self.bytes += nbytes
        try:
            yield
        finally:
            self.tests -= tests
            self.bytes -= nbytes
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)
