"""The context scheduler's rule and the refill batches, as pure functions of the dataset's
order, the job's settings and the ledger (`training.selection`)."""

from __future__ import annotations

from cobalt.orchestrator.training.selection import (
    Priority,
    is_zero_variance,
    priority,
    round_progress,
    round_stream,
)
from cobalt.shared.contracts.training_params import ContextSelection

ORDER = list(range(10, 20))
SCHEDULE = ContextSelection(schedule_contexts=True, schedule_window=2, revisit_probability=0.0)


def test_priority_prefers_variance_and_settles_after_k_uniform_visits() -> None:
    assert priority([], window=2, revisit=False) == Priority.UNSEEN
    assert priority([[1.0, 1.0], [0.0, 1.0]], window=2, revisit=False) == Priority.VARIANCE
    assert priority([[1.0, 1.0]], window=2, revisit=False) == Priority.UNSETTLED  # one visit
    assert priority([[0.0, 0.0], [1.0, 1.0]], window=2, revisit=False) == Priority.UNSETTLED
    assert priority([[0.5, 0.5], [0.5, 0.5]], window=2, revisit=False) == Priority.UNSETTLED
    assert priority([[0.0, 1.0], [1.0], [1.0, 1.0]], window=2, revisit=False) == Priority.SETTLED
    assert priority([[0.0, 0.0], [0.0, 0.0]], window=2, revisit=True) == Priority.REVISIT


def test_without_scheduling_a_round_takes_the_rotated_slice() -> None:
    stream = round_stream(ORDER, job_id=1, round=3, per_step=4, selection=ContextSelection())
    assert stream[:4] == [18, 19, 10, 11] and sorted(stream) == ORDER


def test_the_schedule_puts_variance_first_and_settled_contexts_last() -> None:
    visits = {12: [[1.0, 1.0], [1.0, 1.0]], 13: [[0.0, 0.0], [0.0, 0.0]], 15: [[0.0, 1.0]],
              16: [[1.0, 1.0]]}  # fmt: skip
    stream = round_stream(ORDER, job_id=1, round=1, per_step=4, selection=SCHEDULE, visits=visits)
    assert stream == [15, 10, 11, 14, 17, 18, 19, 16, 12, 13]
    assert sorted(stream) == ORDER  # every context keeps a place: a round is always full
    # Deterministic given the seed and the ledger; the revisit draw depends on the seed.
    revisit = ContextSelection(schedule_contexts=True, revisit_probability=0.5)
    draws = {
        seed: round_stream(ORDER, job_id=1, round=r, per_step=4, selection=revisit, seed=seed,
                           visits=visits)
        for seed in range(8) for r in (1,)
    }  # fmt: skip
    assert draws[3] == round_stream(
        ORDER, job_id=1, round=1, per_step=4, selection=revisit, seed=3, visits=visits
    )
    assert len({tuple(stream) for stream in draws.values()}) > 1  # some seeds revisit


def test_revisits_come_at_about_their_probability() -> None:
    """Two settled contexts, a before b in the order: b goes first exactly when it is drawn
    for a revisit and a is not, p (1 - p) of the rounds."""
    settled = {1: [[1.0], [1.0]], 2: [[0.0], [0.0]]}
    selection = ContextSelection(schedule_contexts=True, revisit_probability=0.25)
    streams = [
        round_stream([1, 2], job_id=7, round=r, per_step=2, selection=selection, visits=settled)
        for r in range(1, 401)
    ]
    assert 40 < sum(stream == [2, 1] for stream in streams) < 120  # 0.1875 x 400 = 75


def test_refill_batches_take_the_next_contexts_until_the_quota_or_the_cap() -> None:
    stream = [1, 2, 3, 4, 5, 6]
    on = ContextSelection(filter_zero_variance=True, max_refill_rounds=2)
    first = round_progress(stream, {}, per_step=3, selection=on)
    assert (first.batch, first.pending, first.refills, first.complete) == (
        [1, 2, 3],
        [1, 2, 3],
        0,
        False,
    )
    # Two of three flat: the refill takes the next two contexts.
    refill = round_progress(stream, {1: True, 2: False, 3: False}, per_step=3, selection=on)
    assert (refill.batch, refill.pending, refill.refills) == ([4, 5], [4, 5], 1)
    # One of those flat too: one more; then the cap (2 refills) ends the round short.
    recorded = {1: True, 2: False, 3: False, 4: True, 5: False}
    assert round_progress(stream, recorded, per_step=3, selection=on).batch == [6]
    done = round_progress(stream, {**recorded, 6: False}, per_step=3, selection=on)
    assert (done.complete, done.informative, done.refills) == (True, 2, 2)
    # Off: the first batch is the round, whatever it recorded.
    off = round_progress(stream, {1: False, 2: False, 3: False}, per_step=3,
                         selection=ContextSelection())  # fmt: skip
    assert off.complete and off.refills == 0


def test_zero_variance_is_equal_rewards() -> None:
    assert is_zero_variance([1.0, 1.0, 1.0]) and is_zero_variance([-0.2, -0.2 + 1e-12])
    assert not is_zero_variance([1.0, 1.0, -1.0])
