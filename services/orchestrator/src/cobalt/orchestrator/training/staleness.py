"""The off-policy window, owned by the orchestrator: how far rollouts may run ahead of the
trainer, and when a sample is too old to train on. One job field (`max_staleness`) and
these rules; changing the rule is a change here (docs/extending.md). The trainer never
sees the window: it asks which rounds to begin (`rounds_to_begin`, over the API) and
claims with its policy version (`is_stale` then expires what is too old).

A trainer on step k has begun rounds k .. k + max_staleness (no round past the job's
budget): the groups of round r are sampled while steps r - 1 - max_staleness .. r - 1
train. A group sampled at policy version v is stale once the trainer is at a version
past v + max_staleness.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["is_stale", "open_rounds", "rounds_to_begin", "scheduling_step", "stale_for"]


def rounds_to_begin(step: int, *, max_staleness: int, budget: int | None) -> range:
    """The rounds a trainer on step `step` has begun once it trains it: the step's own
    round and those sampled ahead while it trains, none past the job's budget."""
    last = step + max_staleness
    if budget is not None:
        last = min(last, budget)
    return range(step, last + 1)


def open_rounds(*, steps_done: int, max_staleness: int, budget: int | None, begun: int) -> range:
    """The rounds open for a trainer that has reported `steps_done` steps: those of the
    step in progress and those it samples ahead (`rounds_to_begin`), and only as far as
    the trainer has begun (`begun`: a trainer that stopped after its last step asked for
    no more)."""
    window = rounds_to_begin(steps_done + 1, max_staleness=max_staleness, budget=budget)
    return range(window.start, min(window.stop, begun + 1))


def scheduling_step(round: int, *, max_staleness: int) -> int:
    """The last step claimed before round `round` could start: its ledger schedules the
    round (`selection`)."""
    return round - 1 - max_staleness


def is_stale(*, current_version: int, sampled_version: int, max_staleness: int) -> bool:
    """Whether a sample of `sampled_version` is too old for a trainer at `current_version`."""
    return current_version - sampled_version > max_staleness


def stale_for(current_version: int, *, max_staleness: int) -> Callable[[int], bool]:
    """`is_stale` for a trainer at `current_version`: sampled version -> too old (what a
    claim hands the store to expire groups with)."""

    def stale(sampled_version: int) -> bool:
        return is_stale(
            current_version=current_version,
            sampled_version=sampled_version,
            max_staleness=max_staleness,
        )

    return stale
