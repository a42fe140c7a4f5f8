"""What a failed run says about its failed trajectories, and whether a resume can help.

A resume runs a failed trajectory's job again from its stored turns. That fixes what went
away (an endpoint or executor that was down, a server error, a worker that died), never a
request the model endpoint refused as sent (a model it does not serve, a field it does
not take: `InvalidInput`), which a resume would send again and see refused again. Such a
trajectory's error says so, and a run whose failures are all of that kind gives no resume
advice.
"""

from __future__ import annotations

from collections.abc import Iterable

from cobalt.shared.errors import CobaltError, InvalidInput

__all__ = ["NOT_RESUMABLE", "failed_trajectory_error", "run_failure"]

NOT_RESUMABLE = "a resume would repeat it: fix the cause and start a new run"
"""Ends the error of a trajectory no resume can finish."""


def failed_trajectory_error(exc: CobaltError) -> str:
    """The error stored with the trajectories a job failed with `exc`."""
    if isinstance(exc, InvalidInput):
        return f"{exc.message}; {NOT_RESUMABLE}"
    return exc.message


def run_failure(run_id: int, errors: Iterable[str | None]) -> str:
    """The run's error from its failed trajectories' errors: resume advice only where a
    resume can finish some of them."""
    errors = list(errors)
    permanent = [e for e in errors if e is not None and e.endswith(NOT_RESUMABLE)]
    head = f"{len(errors)} trajectories failed"
    if permanent and len(permanent) == len(errors):
        return f"{head}: {permanent[0]}"
    advice = f"`cobalt run resume {run_id}` retries them"
    if permanent:
        advice = f"`cobalt run resume {run_id}` retries the {len(errors) - len(permanent)} "
        advice += f"a resume can finish ({len(permanent)} were refused as sent)"
    return f"{head}; {advice}"
