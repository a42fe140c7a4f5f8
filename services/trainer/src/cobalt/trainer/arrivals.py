"""How the trainer waits for a step's rollouts: popping new group ids off the job's Redis
list, or, without Redis, sleeping between asks.

Rollout workers push each group's id on `group_list_key(job)` once it is in the ledger.
The trainer pops them only as a wake-up: after each pop (or after the longest wait) it
asks the orchestrator for the step again, and the ledger decides what the step holds. So
a lost, repeated or stale id costs one extra ask and never changes what is trained on,
and the trainer claims a step as soon as its last group lands instead of up to a polling
interval later.
"""

from __future__ import annotations

import time
from typing import Protocol

from cobalt.shared.contracts.training import group_list_key

__all__ = ["GroupArrivals", "RedisArrivals", "SleepingArrivals", "group_arrivals"]

REDIS_WAIT_FACTOR = 10
"""With Redis, one wait blocks up to this many polling intervals unless a group lands:
the orchestrator is still asked regularly (to see a stopped or failed job)."""


class GroupArrivals(Protocol):
    def wait(self) -> None:
        """Return when a new group may be ready, or after the longest wait."""
        ...

    def close(self) -> None: ...


class SleepingArrivals:
    """No Redis: wait one polling interval."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s

    def wait(self) -> None:
        time.sleep(self.interval_s)

    def close(self) -> None:
        pass


class RedisArrivals:
    """Pop the job's new group ids (BLPOP), every id that is there at once."""

    def __init__(self, redis_url: str, job_id: int, interval_s: float) -> None:
        from redis import Redis

        self._redis = Redis.from_url(redis_url)
        self._key = group_list_key(job_id)
        self._timeout_s = interval_s * REDIS_WAIT_FACTOR
        self.popped = 0
        """Group ids taken off the list so far (shown in tests and logs)."""

    def wait(self) -> None:
        if self._redis.blpop([self._key], timeout=self._timeout_s) is None:
            return
        # Several groups landed at once: one ask covers them all.
        with self._redis.pipeline() as pipe:
            pipe.llen(self._key)
            pipe.delete(self._key)
            length, _ = pipe.execute()
        self.popped += 1 + int(length)

    def close(self) -> None:
        self._redis.close()


def group_arrivals(redis_url: str | None, job_id: int, interval_s: float) -> GroupArrivals:
    """Redis wake-ups when the trainer knows the rollout workers' Redis, else sleeping."""
    if redis_url:
        return RedisArrivals(redis_url, job_id, interval_s)
    return SleepingArrivals(interval_s)
