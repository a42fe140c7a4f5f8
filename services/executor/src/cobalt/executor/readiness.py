"""Readiness that costs nothing per call: evidence from real tests, and a canary when idle.

`/readyz` reads a cached state; it never runs a sandbox. Every judged test is evidence:
a verdict other than `sandbox_error` shows the sandbox works. When no test has finished
for `interval_s`, a background task runs a canary program. The state tells "busy" (every
slot running tests: still ready, so a burst of long tests does not take every replica
out of its Service at once) from "broken" (the canary failed, several sandbox errors
in a row with nothing healthy since, or fewer than `MIN_WORKING_SHARE` of the slots in
service: the pool retires a slot whose fresh jails keep failing, so the verdicts that
do come back stay healthy while the replica's capacity is gone).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from enum import StrEnum

from cobalt.shared.contracts import ExecuteResponse, Verdict
from cobalt.shared.errors import Overloaded

__all__ = ["BROKEN_AFTER_SANDBOX_ERRORS", "MIN_WORKING_SHARE", "Readiness", "ReadyState"]

logger = logging.getLogger(__name__)

BROKEN_AFTER_SANDBOX_ERRORS = 5
"""Sandbox errors in a row, with no healthy verdict between, that mark the executor broken."""
MIN_WORKING_SHARE = 0.5
"""The share of slots that must be in service (not retired) for the executor to be ready."""


class ReadyState(StrEnum):
    STARTING = "starting"
    READY = "ready"
    BUSY = "busy"
    BROKEN = "broken"


class Readiness:
    """The cached readiness of one executor."""

    def __init__(
        self,
        *,
        interval_s: float,
        timeout_s: float,
        busy: Callable[[], bool],
        slots_working: Callable[[], tuple[int, int]] = lambda: (1, 1),
    ) -> None:
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._busy = busy
        self._slots_working = slots_working
        self._healthy_at: float | None = None
        self._sandbox_errors = 0
        self._broken: str | None = None
        self.canaries_run = 0

    def observe(self, verdict: Verdict) -> None:
        """Count one judged test as evidence."""
        if verdict is Verdict.SKIPPED:
            return
        if verdict is Verdict.SANDBOX_ERROR:
            self._sandbox_errors += 1
            if self._sandbox_errors >= BROKEN_AFTER_SANDBOX_ERRORS:
                self._broken = f"{self._sandbox_errors} sandbox errors in a row"
            return
        self._sandbox_errors = 0
        self._healthy_at = time.monotonic()
        self._broken = None

    def state(self) -> tuple[ReadyState, str]:
        """The state and a sentence saying why; no work is done here."""
        if self._broken is not None:
            return ReadyState.BROKEN, self._broken
        working, total = self._slots_working()
        if working < total * MIN_WORKING_SHARE or working == 0:
            return ReadyState.BROKEN, f"only {working} of {total} sandbox slots work"
        if self._healthy_at is None:
            return ReadyState.STARTING, "the first canary has not passed yet"
        if self._busy():
            return ReadyState.BUSY, "every slot is running tests"
        return ReadyState.READY, "the sandbox judged a program correctly"

    async def watch(self, run_canary: Callable[[], Awaitable[ExecuteResponse]]) -> None:
        """Run the canary whenever no test has finished for `interval_s`; never returns."""
        while True:
            if self._no_recent_evidence():
                await self.check(run_canary)
            await asyncio.sleep(self.interval_s / 4)

    def _no_recent_evidence(self) -> bool:
        if self._healthy_at is None:
            return True
        return time.monotonic() - self._healthy_at >= self.interval_s

    async def check(self, run_canary: Callable[[], Awaitable[ExecuteResponse]]) -> None:
        """Run the canary now and record what it shows."""
        self.canaries_run += 1
        try:
            response = await asyncio.wait_for(run_canary(), timeout=self.timeout_s)
        except (TimeoutError, Overloaded):
            if not self._busy():
                self._broken = "the canary did not finish on an idle executor"
            return  # busy: the tests in flight will say how the sandbox is
        except Exception as exc:  # the canary must never kill the watcher
            logger.exception("the readiness canary failed")
            self._broken = f"the canary failed: {type(exc).__name__}"
            return
        if response.passed == response.total:
            self._sandbox_errors = 0
            self._healthy_at = time.monotonic()
            self._broken = None
        else:
            self._broken = f"the canary was judged {response.results[0].verdict.value}"
