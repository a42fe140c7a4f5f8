"""Which contexts a training round rolls out, and which groups carry signal: the rules of
`ContextSelection` (docs/training.md, "Informative groups"), as pure functions of the
dataset's order, the job's settings and what the ledger recorded.

A round's *stream* holds every context once: the dataset's seeded order rotated to start
at (round - 1) x P (P: contexts_per_step), so its first P are the paper's fixed slice.
With `schedule_contexts` the stream is stably re-ordered by what the ledger knows of
each context (`priority`), from the visits claimed by the round's scheduling step
(`staleness.scheduling_step`): round r is begun only once that step is claimed, and a
claimed step's groups never change, so the order is the same whenever (and however
often) the round is asked for, a replay after kill -9 included.

The round's first batch is the stream's first P contexts. With `filter_zero_variance`, a
group whose responses all got the same reward (zero advantage: it teaches nothing) is
recorded as dropped, and once a batch is fully recorded with fewer than P informative
groups in the round, the next batch takes the next P - informative contexts of the
stream, up to `max_refill_rounds` batches (DAPO's dynamic sampling). Each batch is a
function of the ledger's earlier batches, so a replay rolls out the same ones.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from cobalt.shared.contracts.training_params import ContextSelection

__all__ = [
    "Priority",
    "RoundProgress",
    "is_zero_variance",
    "priority",
    "round_progress",
    "round_stream",
]

SPREAD_TOLERANCE = 1e-9
"""Rewards closer than this are one reward (their advantages are 0 either way)."""


def is_zero_variance(episode_rewards: Sequence[float]) -> bool:
    """Whether a group's episodes all got the same reward (GRPO gives them no advantage)."""
    return max(episode_rewards) - min(episode_rewards) <= SPREAD_TOLERANCE


class Priority(IntEnum):
    """A context's place in the scheduled stream: lower goes first."""

    VARIANCE = 0
    """Its last visit's responses differed in pass rate: it still teaches."""
    UNSEEN = 1
    """Not visited yet (or only its pass rates were never recorded)."""
    UNSETTLED = 2
    """Visited without variance, but not in every one of its last k visits."""
    REVISIT = 3
    """Settled, but drawn for a revisit this round (`revisit_probability`)."""
    SETTLED = 4
    """Solved, or failed, by every sample of its last k visits: last in the stream."""


def priority(visits: Sequence[Sequence[float]], *, window: int, revisit: bool) -> Priority:
    """A context's priority from its visits, oldest first, each the pass rates of its
    episodes; `revisit`: the seeded draw for this context and round came up."""
    if not visits:
        return Priority.UNSEEN
    last = visits[-1]
    if max(last) - min(last) > SPREAD_TOLERANCE:
        return Priority.VARIANCE
    recent = [rate for visit in visits[-window:] for rate in visit]
    settled = len(visits) >= window and (
        all(rate >= 1.0 for rate in recent) or all(rate <= 0.0 for rate in recent)
    )
    if not settled:
        return Priority.UNSETTLED
    return Priority.REVISIT if revisit else Priority.SETTLED


def _revisit_draw(seed: int | None, job_id: int, round: int, context_id: int) -> float:
    """A uniform draw in [0, 1) fixed by (seed, job, round, context): the same on every
    process and every replay (a string seeds `random` through SHA-512)."""
    return random.Random(f"{seed}:{job_id}:{round}:{context_id}").random()


def round_stream(
    ordered: Sequence[int],
    *,
    job_id: int,
    round: int,
    per_step: int,
    selection: ContextSelection,
    seed: int | None = None,
    visits: Mapping[int, Sequence[Sequence[float]]] | None = None,
) -> list[int]:
    """Round `round`'s stream: every context of `ordered` once, rotated to the round's
    slice, re-ordered by `priority` when the job schedules (`visits`: per context id, its
    claimed visits oldest first; `seed`: the job's, for the revisit draws)."""
    if not ordered:
        return []
    start = (round - 1) * per_step % len(ordered)
    stream = [*ordered[start:], *ordered[:start]]
    if not selection.schedule_contexts:
        return stream
    seen = visits or {}
    ranks = {
        context_id: priority(
            seen.get(context_id, ()),
            window=selection.schedule_window,
            revisit=_revisit_draw(seed, job_id, round, context_id) < selection.revisit_probability,
        )
        for context_id in stream
    }
    return sorted(stream, key=lambda context_id: ranks[context_id])  # stable: keeps rotation


@dataclass(frozen=True, slots=True)
class RoundProgress:
    """Where a round stands, read from the ledger."""

    batch: list[int]
    """The contexts of its current batch (the first P, or the latest refill)."""
    pending: list[int]
    """Those of `batch` with no group recorded yet: what is still to roll out."""
    refills: int
    """Refill batches begun after the first one."""
    informative: int
    """Groups recorded for the round so far that can be trained on (not dropped)."""
    complete: bool
    """No batch is pending nor due: the round has its P informative groups, or its
    refills are spent, or its stream is."""


def round_progress(
    stream: Sequence[int],
    recorded: Mapping[int, bool],
    *,
    per_step: int,
    selection: ContextSelection,
) -> RoundProgress:
    """The round's progress, from its `stream` and the groups `recorded` for it (context
    id -> whether the group is informative, i.e. not dropped)."""
    taken = min(per_step, len(stream))
    batch, refills = list(stream[:taken]), 0
    while True:
        pending = [context_id for context_id in batch if context_id not in recorded]
        informative = sum(bool(recorded.get(context_id)) for context_id in stream[:taken])
        if pending:
            return RoundProgress(batch, pending, refills, informative, complete=False)
        needed = per_step - informative
        if (
            not selection.filter_zero_variance
            or needed <= 0
            or refills >= selection.max_refill_rounds
            or taken >= len(stream)
        ):
            return RoundProgress(batch, [], refills, informative, complete=True)
        batch = list(stream[taken : taken + needed])
        taken += len(batch)
        refills += 1
