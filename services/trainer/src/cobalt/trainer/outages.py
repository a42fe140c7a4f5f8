"""Waiting out a service the trainer depends on while it is down (restarting, failing
over), instead of losing the job's process to a few seconds of refusals.

One rule for the orchestrator and the inference service: a call that raises `Unavailable`
(unreachable, or 503 after the client's own retries with backoff) is sent again, an
interval apart, until `outage_s` has passed since that call first failed; then the error
goes up and `cobalt trainer serve` exits 3, and a restart resumes (loop.py). Only calls
that are safe to repeat come here: every call of the training API, and a publish (a
replica that already serves the version keeps it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from cobalt.shared.errors import Unavailable

__all__ = ["through_outage"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


def through_outage(call: Callable[[], _T], *, outage_s: float, interval_s: float, what: str) -> _T:
    """`call()`, sent again while `what` (named in the log line) is unavailable, for up to
    `outage_s`, `interval_s` apart.

    Raises:
        Unavailable: the outage lasted longer.
    """
    deadline = time.monotonic() + outage_s
    while True:
        try:
            return call()
        except Unavailable as exc:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            logger.warning(
                "%s is unavailable (%s); trying again for %.0f s more", what, exc.message, left
            )
            time.sleep(min(interval_s, left))
