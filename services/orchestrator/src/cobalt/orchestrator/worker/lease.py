"""A queued job's lease: a Redis key its worker keeps fresh while it holds the job, so run
recovery (`worker.recovery`) knows a live worker has it.

The key lapses `LEASE_TTL_INTERVALS` recovery intervals after its worker last wrote it
(killed, OOM, evicted) and is written again soon after Redis comes back empty.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
from collections.abc import Iterator

__all__ = ["LEASE_TTL_INTERVALS", "held_lease", "lease_key"]

logger = logging.getLogger(__name__)

LEASE_TTL_INTERVALS = 3
"""A lease lapses this many recovery intervals after its worker last refreshed it."""


def lease_key(queue_id: str) -> str:
    return f"cobalt:run-lease:{queue_id}"


@contextlib.contextmanager
def held_lease(redis_url: str, queue_id: str, interval_s: float) -> Iterator[None]:
    """Hold `queue_id`'s lease while the block runs: a thread writes it every `interval_s`
    (with a time to live of `LEASE_TTL_INTERVALS` intervals), so it lapses soon after this
    process dies and comes back soon after Redis restarted empty. Redis being unreachable
    meanwhile is not the job's problem: the lease is written again when it is back."""
    from redis import Redis
    from redis.exceptions import RedisError

    key = lease_key(queue_id)
    ttl_ms = max(1, math.ceil(interval_s * LEASE_TTL_INTERVALS * 1000))
    stop = threading.Event()
    with Redis.from_url(redis_url, socket_timeout=interval_s + 1) as redis:

        def refresh() -> None:
            while True:
                try:
                    redis.set(key, "held", px=ttl_ms)
                except RedisError as exc:
                    logger.debug("lease %s not written: %s", key, exc)
                if stop.wait(interval_s):
                    return

        thread = threading.Thread(target=refresh, name=f"lease-{queue_id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()
            with contextlib.suppress(RedisError):
                redis.delete(key)
