"""Refusing a run whose limits its executor would refuse, before anything of it is written.

The executor refuses a request whose per-test limits are above its `COBALT_EXECUTOR_MAX_*`
settings; a run asking for such limits would otherwise be created and then fail every
program it judges. So creating a run (API and CLI alike, through `runs.service`) first
asks COBALT_EXECUTOR_URL's executor for its maximums (`GET /v1/info`, once per creation:
nothing is cached, the executor may be restarted with other settings between runs).

An executor that cannot be asked refuses the run too (503, CLI exit 3): a run is not
created on limits nobody checked. Without COBALT_EXECUTOR_URL there is no executor to
ask (the jobs start a local one, or queue workers use theirs); the limits are then
checked when the programs run, as every executor request is.
"""

from __future__ import annotations

from dataclasses import dataclass

from cobalt.shared.clients import ExecutorClient, ExecutorClientSettings
from cobalt.shared.contracts.executor import ExecutorInfo, Limits, limits_above_maximum
from cobalt.shared.errors import CobaltError, LimitTooHigh, Unavailable

__all__ = ["INFO_TIMEOUT_S", "ExecutorMaximums", "executor_maximums"]

INFO_TIMEOUT_S = 10.0
"""Seconds to wait for the executor's `GET /v1/info` (it answers from its settings, at once)."""


@dataclass(frozen=True)
class ExecutorMaximums:
    """What an executor accepts, asked once, before the run's transaction opens (no
    database connection waits on the network)."""

    url: str
    info: ExecutorInfo

    def refuse_above(self, limits: Limits, *, chosen_by: str) -> None:
        """Raise LimitTooHigh if a limit is above the executor's maximum; the message names
        the limit, the value, the maximum and the executor setting that raises it.
        `chosen_by` says where the limits come from (e.g. "the request")."""
        above = limits_above_maximum(limits, self.info.max_limits, self.info.limit_settings)
        if above:
            raise LimitTooHigh(
                "; ".join(limit.message() for limit in above)
                + f" (limits chosen by {chosen_by}; executor at {self.url})",
                detail={"executor_url": self.url, "limits": [limit.detail() for limit in above]},
            )


def executor_maximums(executor: ExecutorClientSettings) -> ExecutorMaximums | None:
    """COBALT_EXECUTOR_URL's executor's maximum limits; None without a URL (nothing to ask,
    nothing checked).

    Raises:
        Unavailable: the executor could not be asked (unreachable, not ready, refused
            our token, answered something else); the message names its URL.
    """
    if not executor.url:
        return None
    url = executor.url
    try:
        with ExecutorClient(
            base_url=url,
            token=executor.auth_token,
            timeout=INFO_TIMEOUT_S,
            retry=executor.retry(),
        ) as client:
            return ExecutorMaximums(url=url, info=client.info())
    except (CobaltError, ValueError) as exc:  # ValueError: the URL is not http(s)
        raise Unavailable(
            f"cannot ask the executor at {url} for its maximum limits, so the run is not "
            f"created: {exc}",
            detail={"executor_url": url},
        ) from exc
