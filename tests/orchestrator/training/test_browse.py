"""What the training pages show besides the stored metrics: the GRPO advantage of each
sample (the trainer's formula, on the same known values as tests/trainer/test_grpo.py)
and a job's liveness as a function of its last report."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from cobalt.orchestrator.training.browse import group_advantages, liveness_of
from cobalt.shared.contracts.training import JobLiveness

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def test_advantages_known_values() -> None:
    # reference/env.md's numbers, as tests/trainer/test_grpo.py pins the trainer to them.
    assert group_advantages([1.0, 0, 1, 0]) == pytest.approx(
        [0.866, -0.866, 0.866, -0.866], abs=1e-3
    )
    assert group_advantages([1.0, 1, 1, 0]) == pytest.approx([0.5, 0.5, 0.5, -1.5], abs=1e-3)


@pytest.mark.parametrize("value", [0.0, 1.0, 0.7, 0.1, 1 / 3])
def test_equal_rewards_have_exactly_zero_advantage(value: float) -> None:
    assert group_advantages([value] * 16) == [0.0] * 16


def test_a_group_of_one_has_no_advantage() -> None:
    assert group_advantages([0.5]) == [None]


@pytest.mark.parametrize(
    ("status", "silent_s", "liveness"),
    [
        ("running", 60, JobLiveness.LIVE),
        ("running", 7200, JobLiveness.STALE),
        ("pending", 7200, JobLiveness.STALE),
        ("stopped", 7200, JobLiveness.ENDED),
        ("finished", 60, JobLiveness.ENDED),
        ("failed", 7200, JobLiveness.ENDED),
        ("stale", 60, JobLiveness.STALE),  # a status the lifecycle may add: still stale
    ],
)
def test_liveness_is_a_function_of_the_last_report(
    status: str, silent_s: int, liveness: JobLiveness
) -> None:
    last = NOW - timedelta(seconds=silent_s)
    assert liveness_of(status, last, NOW, stale_after_s=1800) == liveness


def test_sqlite_times_without_a_zone_are_utc() -> None:
    naive = (NOW - timedelta(hours=2)).replace(tzinfo=None)
    assert liveness_of("running", naive, NOW, stale_after_s=1800) == JobLiveness.STALE
    assert liveness_of("running", None, NOW, stale_after_s=1800) == JobLiveness.LIVE
