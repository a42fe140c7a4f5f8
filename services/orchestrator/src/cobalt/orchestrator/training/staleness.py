"""The off-policy window, owned by the orchestrator: how far rollouts may run ahead of the
trainer, and when a sample is too old to train on. One job field (`max_staleness`) and
these rules; changing the rule is a change here (docs/extending.md).

A trainer on step k has started rounds k .. k + max_staleness (no round past the job's
budget): the groups of round r are sampled while steps r - 1 - max_staleness .. r - 1
train. A group sampled at policy version v is stale once the trainer is at a version
past v + max_staleness.
"""

from __future__ import annotations

__all__ = ["is_stale", "open_rounds", "scheduling_step"]


def open_rounds(*, steps_done: int, max_staleness: int, budget: int | None, begun: int) -> range:
    """The rounds open for a trainer that has reported `steps_done` steps: those of the
    step in progress and those it samples ahead, within the job's budget, and only as far
    as the trainer has begun (`begun`: a trainer that stopped after its last step asked
    for no more)."""
    last = min(steps_done + 1 + max_staleness, begun)
    if budget is not None:
        last = min(last, budget)
    return range(steps_done + 1, last + 1)


def scheduling_step(round: int, *, max_staleness: int) -> int:
    """The last step claimed before round `round` could start: its ledger schedules the
    round (`selection`)."""
    return round - 1 - max_staleness


def is_stale(*, current_version: int, sampled_version: int, max_staleness: int) -> bool:
    """Whether a sample of `sampled_version` is too old for a trainer at `current_version`."""
    return current_version - sampled_version > max_staleness
