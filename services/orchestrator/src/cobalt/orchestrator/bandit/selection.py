"""The contextual-bandit builder's rules, on plain data (docs/method.md, Contextual-bandit dataset).

Given one problem's trajectories of an evaluated refine run (per turn: the pass rate over
all tests and whether every public test passed), decide which trajectories become
contexts and which partial trajectories of them are emitted, counting what each rule
dropped. Everything here is pure; `builder` reads the rows and writes the results.

Decisions where docs/method.md is silent, and why:
- A turn without a program passes nothing (pass 0), and its "feedback" asked for code, so
  it is never an all-public-tests-passed feedback.
- Dynamic sampling, the turn-0 context and the candidate rule apply per problem, in both
  modes; validation mode emits no turn-0 context (its purpose is one hard context per
  problem, scored 1 or 0).
- Ties in the down-sampling sort (equal improvement) keep sample order, so the result does
  not depend on how the database returned rows.
- The token cap stops a trajectory at the first context over the cap: later contexts of
  the same trajectory are longer still.

Two readings of the research script are offered as parity options (docs/bandit.md has
both side by side): its first-context stop checks turns 0 and 2 (`RESEARCH_FIRST_STOP_TURNS`;
ours, with docs/method.md, turns 0 and 1), and its validation set holds the turn-0 context plus
the chosen trajectory's contexts after 1, 2 and 3 turns under the stop rules
(`plan_research_validation_contexts`; ours: one context of up to 8 messages).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_CONTEXT_TURNS",
    "DEFAULT_FIRST_STOP_TURNS",
    "DEFAULT_KEEP",
    "RESEARCH_FIRST_STOP_TURNS",
    "DropCounts",
    "PlannedContext",
    "TrajectoryScores",
    "max_variance_subset",
    "pass_over_all_tests",
    "plan_contexts",
    "plan_research_validation_contexts",
    "plan_validation_context",
]

DEFAULT_KEEP = 4
"""m: trajectories kept per problem by max-variance down-sampling."""
DEFAULT_CONTEXT_TURNS = (1, 2, 3)
"""Contexts are cut after this many assistant turns (4, 6 and 8 messages with a system
message)."""
DEFAULT_FIRST_STOP_TURNS = (0, 1)
"""A trajectory yields no context at all when both of these turns pass every test
(docs/method.md: its first context, after turn 0, would teach nothing)."""
RESEARCH_FIRST_STOP_TURNS = (0, 2)
"""The research script's index arithmetic checks turns 0 and 2 there (a parity option:
a differential test found 201 of 400 problems differ)."""


def pass_over_all_tests(public: Sequence[str], hidden: Sequence[str], has_code: bool) -> float:
    """pass(traj, turn) = (hidden passed + public passed) / (all tests), from verdicts.

    The same as docs/method.md's (hidden_rate * n_hidden + public_rate * n_public) / n_all.
    """
    if not has_code:
        return 0.0
    total = len(public) + len(hidden)
    if total == 0:
        return 0.0
    accepted = sum(v == "accepted" for v in public) + sum(v == "accepted" for v in hidden)
    return accepted / total


@dataclass(frozen=True, slots=True)
class TrajectoryScores:
    """What the rules need of one trajectory, per turn in order."""

    sample_index: int
    passes: tuple[float, ...]
    """Pass rate over all tests of each turn's program."""
    public_all_passed: tuple[bool, ...]
    """Whether each turn's feedback was the all-public-tests-passed message."""

    @property
    def improvement(self) -> float:
        return max(self.passes) - min(self.passes) if self.passes else 0.0


@dataclass
class DropCounts:
    """How many problems, trajectories and contexts each rule kept or dropped."""

    problems: int = 0
    problems_all_pass_at_turn_0: int = 0
    """Dynamic sampling: every turn-0 sample passed every test."""
    trajectories: int = 0
    trajectories_incomplete: int = 0
    """Not finished, or missing turns or hidden results: never used."""
    not_candidates: int = 0
    """Improvement 0, or (training) never reaching pass 1.0."""
    dropped_by_downsampling: int = 0
    turn_0_contexts: int = 0
    partial_contexts: int = 0
    stopped_first_context_both_pass: int = 0
    stopped_two_passed_feedbacks: int = 0
    dropped_over_token_cap: int = 0
    problems_without_candidate: int = 0
    mixed_in: dict[str, int] = field(default_factory=dict)
    """Contexts copied from other bandit datasets, by name (perturbed augmentation)."""

    def as_dict(self) -> dict[str, object]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True, slots=True)
class PlannedContext:
    """A context to emit: the first `assistant_turns` turns of a trajectory."""

    sample_index: int
    assistant_turns: int
    prev_best: float


def max_variance_subset(improvements: Sequence[float], keep: int = DEFAULT_KEEP) -> list[int]:
    """Indices (into `improvements`) of the `keep` candidates docs/method.md keeps.

    Sort ascending; start with the `keep` lowest; for k = 1 .. keep-1 try the keep-k lowest
    plus the k highest, and keep that set when the variance of its improvements is
    strictly larger than the kept set's. With `keep` or fewer candidates, all are kept.
    """
    order = sorted(range(len(improvements)), key=lambda i: (improvements[i], i))
    if len(order) <= keep:
        return order
    best = order[:keep]
    best_variance = statistics.pvariance([improvements[i] for i in best])
    for k in range(1, keep):
        trial = order[: keep - k] + order[-k:]
        variance = statistics.pvariance([improvements[i] for i in trial])
        if variance > best_variance:
            best, best_variance = trial, variance
    return best


def _candidates(trajectories: Sequence[TrajectoryScores], *, must_solve: bool) -> list[int]:
    return [
        i
        for i, t in enumerate(trajectories)
        if t.improvement > 0 and (not must_solve or max(t.passes) >= 1.0)
    ]


def plan_contexts(
    trajectories: Sequence[TrajectoryScores],
    counts: DropCounts,
    *,
    keep: int = DEFAULT_KEEP,
    context_turns: Sequence[int] = DEFAULT_CONTEXT_TURNS,
    first_stop_turns: tuple[int, int] = DEFAULT_FIRST_STOP_TURNS,
) -> tuple[bool, list[PlannedContext]]:
    """The training contexts of one problem (the caller applies the token cap).

    Args:
        trajectories: The problem's complete trajectories.
        counts: Updated with what each rule dropped.
        keep: m of the down-sampling.
        context_turns: Assistant turns after which contexts are cut.
        first_stop_turns: The two turns whose passing everything stops a trajectory at
            its first context.

    Returns:
        (emit the turn-0 context, the partial-trajectory contexts in order). The first is
        False only when dynamic sampling skips the problem.
    """
    if trajectories and all(t.passes[0] >= 1.0 for t in trajectories):
        counts.problems_all_pass_at_turn_0 += 1
        return False, []
    candidates = _candidates(trajectories, must_solve=True)
    counts.not_candidates += len(trajectories) - len(candidates)
    kept = [
        candidates[i]
        for i in max_variance_subset([trajectories[c].improvement for c in candidates], keep)
    ]
    counts.dropped_by_downsampling += len(candidates) - len(kept)
    planned: list[PlannedContext] = []
    for index in sorted(kept, key=lambda i: trajectories[i].sample_index):
        planned += _trajectory_contexts(
            trajectories[index], counts, context_turns, first_stop_turns
        )
    return True, planned


def _trajectory_contexts(
    trajectory: TrajectoryScores,
    counts: DropCounts,
    context_turns: Sequence[int],
    first_stop_turns: tuple[int, int],
) -> list[PlannedContext]:
    """Contexts after 1, 2, 3 assistant turns, until a stop rule ends the trajectory."""
    passes, passed_public = trajectory.passes, trajectory.public_all_passed
    contexts: list[PlannedContext] = []
    for turns in context_turns:
        if turns > len(passes):
            break
        if turns == 1 and all(t < len(passes) and passes[t] >= 1.0 for t in first_stop_turns):
            counts.stopped_first_context_both_pass += 1
            break
        if turns >= 2 and passed_public[turns - 2] and passed_public[turns - 1]:
            counts.stopped_two_passed_feedbacks += 1
            break
        contexts.append(PlannedContext(trajectory.sample_index, turns, max(passes[:turns])))
    return contexts


def plan_validation_context(
    trajectories: Sequence[TrajectoryScores],
    counts: DropCounts,
    *,
    max_turns: int = max(DEFAULT_CONTEXT_TURNS),
) -> PlannedContext | None:
    """Validation mode: one context per problem, from its smallest-improvement candidate.

    The candidate needs only an improvement > 0; its context holds up to `max_turns`
    assistant turns (8 messages with a system message).
    """
    _, trajectory = _validation_candidate(trajectories, counts)
    if trajectory is None:
        return None
    turns = min(max_turns, len(trajectory.passes))
    return PlannedContext(trajectory.sample_index, turns, max(trajectory.passes[:turns]))


def plan_research_validation_contexts(
    trajectories: Sequence[TrajectoryScores],
    counts: DropCounts,
    *,
    context_turns: Sequence[int] = DEFAULT_CONTEXT_TURNS,
    first_stop_turns: tuple[int, int] = DEFAULT_FIRST_STOP_TURNS,
) -> tuple[bool, list[PlannedContext]]:
    """The research script's validation set (a parity option): the turn-0 context plus
    the smallest-improvement candidate's contexts after 1, 2 and 3 turns, under the same
    stop rules as training contexts.

    Returns:
        (emit the turn-0 context, the candidate's contexts), as `plan_contexts`; a problem
        without a candidate (improvement > 0) still gets its turn-0 context.
    """
    kept, trajectory = _validation_candidate(trajectories, counts)
    if trajectory is None:
        return kept, []
    return True, _trajectory_contexts(trajectory, counts, context_turns, first_stop_turns)


def _validation_candidate(
    trajectories: Sequence[TrajectoryScores], counts: DropCounts
) -> tuple[bool, TrajectoryScores | None]:
    """(dynamic sampling keeps the problem, its candidate with the smallest improvement,
    the first by sample order on ties, or None when no trajectory improved)."""
    if trajectories and all(t.passes[0] >= 1.0 for t in trajectories):
        counts.problems_all_pass_at_turn_0 += 1
        return False, None
    candidates = _candidates(trajectories, must_solve=False)
    counts.not_candidates += len(trajectories) - len(candidates)
    if not candidates:
        counts.problems_without_candidate += 1
        return True, None
    chosen = min(candidates, key=lambda i: (trajectories[i].improvement, i))
    counts.dropped_by_downsampling += len(candidates) - 1
    return True, trajectories[chosen]
