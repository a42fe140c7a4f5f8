"""The shuffled-reward control (docs/experiments.md, "Arms"): rewards permuted within each
GRPO group before advantages are computed, so that a job trains on exactly the reward
values and group statistics it sampled, but with each reward attached to a response it
does not belong to. What the trained arm gains over this control is what the rewards
taught, not what the updates, the data or the step count did by themselves.

Shared because two services compute advantages from the same rewards: the trainer trains
on them (`cobalt.trainer.step.episode_advantages`) and the orchestrator shows them in the
step ledger (`cobalt.orchestrator.training.browse`); both must permute alike.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Sequence

__all__ = ["shuffled_within_groups"]


def shuffled_within_groups(
    rewards: Sequence[float], group_ids: Sequence[Hashable], seed: int
) -> list[float]:
    """`rewards` with each group's values permuted among its members.

    One permutation per group, drawn from `seed` and the group's id (its `repr`), so it
    is the same in every process and for every order the groups come in; members keep
    their order of appearance. Each group keeps its multiset of rewards, hence its mean
    and spread: only which response carries which reward changes.
    """
    if len(rewards) != len(group_ids):
        raise ValueError(f"{len(group_ids)} group ids for {len(rewards)} rewards")
    members: dict[Hashable, list[int]] = {}
    for row, group in enumerate(group_ids):
        members.setdefault(group, []).append(row)
    shuffled = [float(r) for r in rewards]
    for group, rows in members.items():
        values = [float(rewards[row]) for row in rows]
        random.Random(f"{seed}:{group!r}").shuffle(values)
        for row, value in zip(rows, values, strict=True):
            shuffled[row] = value
    return shuffled
