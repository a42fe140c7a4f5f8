"""The statistics module against direct computations: Wilson's and Newcombe's formulas
written out by hand for known cases, the bootstraps against a naive bootstrap that draws
problems one by one, their coverage in simulated evaluations (independent and common
random numbers), and properties over arbitrary counts."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cobalt.orchestrator.analysis.statistics import (
    MIN_PROBLEMS_FOR_A_VERDICT,
    bootstrap_difference,
    bootstrap_pass_at_1,
    difference_verdict,
    newcombe_difference,
    wilson_interval,
)
from cobalt.orchestrator.analysis.text import interval_text
from cobalt.shared.contracts.browse import DifferenceVerdict

Z = 1.959963984540054


def test_wilson_matches_the_formula_and_a_published_case() -> None:
    # Newcombe (1998), table I: 81/263 -> 0.2553 to 0.3662.
    low, high = wilson_interval(81, 263) or (0, 0)
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)
    p, n = 3 / 10, 10
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    assert wilson_interval(3, 10) == pytest.approx((centre - half, centre + half), abs=1e-9)
    assert wilson_interval(0, 4) == pytest.approx((0.0, 0.4899), abs=1e-4)
    assert wilson_interval(0, 0) is None


def test_newcombe_matches_the_published_case() -> None:
    # Newcombe (1998), table II, method 10: 56/70 vs 48/80 -> 0.0524 to 0.3339.
    low, high = newcombe_difference(48, 80, 56, 70) or (0, 0)
    assert (round(low, 4), round(high, 4)) == (0.0524, 0.3339)


def test_four_samples_one_flip_is_noise_all_four_is_not() -> None:
    one_flip = newcombe_difference(1, 4, 2, 4)
    assert one_flip is not None and one_flip[0] < 0 < one_flip[1]
    all_four = newcombe_difference(0, 4, 4, 4)
    assert all_four is not None and all_four[0] > 0


def _naive_bootstrap(counts: list[tuple[int, int]], resamples: int, seed: int) -> list[float]:
    """Problems drawn one by one, each with the rate its samples gave."""
    rng = random.Random(seed)
    means = []
    for _ in range(resamples):
        drawn = [counts[rng.randrange(len(counts))] for _ in counts]
        means.append(sum(c / n for c, n in drawn) / len(drawn))
    means.sort()
    return [means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]]


def test_bootstrap_agrees_with_a_naive_bootstrap() -> None:
    # 24 problems of 4 samples: the means lie on a grid of 1/96, fine enough to compare.
    counts = [(0, 4), (1, 4), (4, 4), (2, 4), (3, 4), (0, 4), (4, 4), (1, 4)] * 3
    naive = _naive_bootstrap(counts, 3000, seed=1)
    ours = bootstrap_pass_at_1(counts, resamples=3000, seed=1)
    assert ours == pytest.approx(naive, abs=0.025)


def _simulated_problems(rng: Any, count: int) -> tuple[Any, Any]:
    """True pass rates of `count` problems before and after training: a mean gain of
    about +0.1, some problems gaining more, some losing."""
    import numpy as np

    before = rng.uniform(0.05, 0.95, count)
    return before, np.clip(before + 0.1 + rng.normal(0, 0.15, count), 0, 1)


def _coverage(common_random_numbers: bool, replications: int = 400) -> tuple[float, float, float]:
    """How often the 95% intervals hold the truth over simulated evaluations of 64
    problems x 4 samples: (the difference's coverage, its mean width, the single
    run's coverage). The truth is the mean over the problems' population (400,000 drawn),
    the quantity a held-out set of problems estimates."""
    import numpy as np

    rng = np.random.default_rng(7)
    population = _simulated_problems(rng, 400_000)
    true_before = float(population[0].mean())
    true_gain = float((population[1] - population[0]).mean())
    problems, n = 64, 4
    held = held_single = 0
    widths = []
    for replication in range(replications):
        before, after = _simulated_problems(rng, problems)
        if common_random_numbers:  # sample j draws the same number in both runs
            draws = rng.uniform(size=(problems, n))
            passes_a = (draws < before[:, None]).sum(axis=1)
            passes_b = (draws < after[:, None]).sum(axis=1)
        else:
            passes_a, passes_b = rng.binomial(n, before), rng.binomial(n, after)
        pairs = [(int(a), n, int(b), n) for a, b in zip(passes_a, passes_b, strict=True)]
        low, high = bootstrap_difference(pairs, seed=replication) or (2.0, -2.0)
        held += low <= true_gain <= high
        widths.append(high - low)
        low, high = bootstrap_pass_at_1([(int(a), n) for a in passes_a], seed=replication) or (
            2.0,
            -1.0,
        )
        held_single += low <= true_before <= high
    return held / replications, float(np.mean(widths)), held_single / replications


def test_intervals_hold_the_truth_about_95_percent_of_the_time() -> None:
    """Coverage, simulated: a 95% interval holds the true value in 92-98% of evaluations
    (400 replications: 0.95 +- 0.03 is over 2.5 standard errors). The two-level bootstrap
    this replaced (samples drawn again inside each drawn problem) held it in 99% and 100%
    of them: intervals wider than they claim. Common random numbers narrow the
    difference's interval (by a third here) and it still covers."""
    independent, independent_width, single = _coverage(common_random_numbers=False)
    paired, paired_width, _ = _coverage(common_random_numbers=True)
    assert 0.92 <= independent <= 0.98, independent
    assert 0.92 <= paired <= 0.98, paired
    assert 0.92 <= single <= 0.98, single
    assert paired_width < 0.8 * independent_width, (paired_width, independent_width)


def test_bootstrap_is_seeded_and_nothing_measured_is_none() -> None:
    counts = [(1, 4), (3, 4), (0, 4)]
    assert bootstrap_pass_at_1(counts) == bootstrap_pass_at_1(counts)
    varied = [(c % 9, 8) for c in range(40)]
    assert bootstrap_pass_at_1(varied, seed=1) != bootstrap_pass_at_1(varied, seed=2)
    assert bootstrap_pass_at_1([]) is None
    assert bootstrap_difference([]) is None


def test_difference_of_a_run_with_itself_is_centred_on_zero() -> None:
    pairs = [(c, 4, c, 4) for c in (0, 1, 2, 3, 4, 2, 1)]
    low, high = bootstrap_difference(pairs) or (1, 1)
    assert low < 0 < high and low == pytest.approx(-high, abs=0.03)


counts_strategy = st.lists(
    st.integers(min_value=1, max_value=16).flatmap(
        lambda n: st.tuples(st.integers(min_value=0, max_value=n), st.just(n))
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(counts_strategy)
def test_bootstrap_interval_lies_in_zero_one_and_holds_constant_rates(
    counts: list[tuple[int, int]],
) -> None:
    low, high = bootstrap_pass_at_1(counts, resamples=300) or (2.0, -1.0)
    # never certain: some width whatever the counts (issue 49: "0.000 [0.000, 0.000]")
    assert 0.0 <= low < high <= 1.0
    point = sum(c / n for c, n in counts) / len(counts)
    assert low <= point <= high
    pooled = wilson_interval(sum(c for c, _ in counts), sum(n for _, n in counts))
    if len(counts) == 1:
        assert (low, high) == wilson_interval(*counts[0])  # a single rate
    elif all(c == 0 for c, _ in counts) or all(c == n for c, n in counts):
        assert (low, high) == pooled  # nothing varied: the pooled counts' score interval


def test_nothing_varied_reads_as_the_pooled_score_interval_not_zero_width() -> None:
    # 20 problems x 4 samples, none passing: 0 of 80 -> about [0, 0.046], as in the issue
    low, high = bootstrap_pass_at_1([(0, 4)] * 20) or (1.0, 0.0)
    assert low == 0.0 and high == pytest.approx(0.0458, abs=1e-3)
    same = bootstrap_difference([(0, 4, 0, 4)] * 20) or (0.0, 0.0)
    assert same == pytest.approx((-0.0458, 0.0458), abs=1e-3)


pairs_strategy = st.lists(
    st.tuples(st.integers(1, 8), st.integers(1, 8)).flatmap(
        lambda ns: st.tuples(
            st.integers(0, ns[0]), st.just(ns[0]), st.integers(0, ns[1]), st.just(ns[1])
        )
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=60, deadline=None)
@given(pairs_strategy)
def test_difference_interval_has_width_and_holds_the_estimate(
    pairs: list[tuple[int, int, int, int]],
) -> None:
    low, high = bootstrap_difference(pairs, resamples=300) or (2.0, -2.0)
    assert -1.0 <= low < high <= 1.0
    point = sum(c_b / n_b - c_a / n_a for c_a, n_a, c_b, n_b in pairs) / len(pairs)
    assert low <= point <= high


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 50), st.integers(1, 50), st.floats(0.5, 0.999))
def test_wilson_contains_the_rate_and_widens_with_confidence(
    successes: int, extra: int, confidence: float
) -> None:
    trials = successes + extra
    low, high = wilson_interval(successes, trials, confidence) or (2.0, -1.0)
    assert 0.0 <= low <= successes / trials <= high <= 1.0
    wider = wilson_interval(successes, trials, min(0.9999, confidence + 0.0005)) or (0, 0)
    assert wider[0] <= low + 1e-12 and wider[1] >= high - 1e-12


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 30), st.integers(1, 30), st.data())
def test_newcombe_contains_the_difference_and_is_antisymmetric(
    n_a: int, n_b: int, data: st.DataObject
) -> None:
    c_a = data.draw(st.integers(0, n_a))
    c_b = data.draw(st.integers(0, n_b))
    low, high = newcombe_difference(c_a, n_a, c_b, n_b) or (2.0, -2.0)
    assert -1.0 <= low <= c_b / n_b - c_a / n_a <= high <= 1.0
    swapped = newcombe_difference(c_b, n_b, c_a, n_a) or (0, 0)
    assert swapped == pytest.approx((-high, -low))


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(1e-6, 1.0), st.booleans())
def test_an_interval_is_never_written_with_equal_ends(
    low: float, width: float, signed: bool
) -> None:
    shown = interval_text((low, low + width), signed=signed)
    first, second = shown.strip("[]").split(", ")
    assert first != second, shown
    assert interval_text((0.0, 0.046)) == "[0.000, 0.046]"
    assert interval_text((0.0, 0.00038)) == "[0.0000, 0.0004]"


def test_a_verdict_needs_enough_problems_and_an_interval_clear_of_zero() -> None:
    """Nine problems that each went 0/4 -> 2/4 give an interval far above 0, but it is
    their samples' noise, not how problems differ: no verdict; over 10 there is one."""
    clear = bootstrap_difference([(0, 4, 2, 4)] * (MIN_PROBLEMS_FOR_A_VERDICT - 1))
    assert clear is not None and clear[0] > 0
    few = MIN_PROBLEMS_FOR_A_VERDICT - 1
    assert difference_verdict(clear, few) == DifferenceVerdict.TOO_FEW_PROBLEMS
    assert difference_verdict(clear, MIN_PROBLEMS_FOR_A_VERDICT) == DifferenceVerdict.BETTER
    assert difference_verdict((-0.3, -0.1), 200) == DifferenceVerdict.WORSE
    assert difference_verdict((-0.1, 0.1), 200) == DifferenceVerdict.WITHIN_NOISE
    assert difference_verdict((0.0, 0.2), 200) == DifferenceVerdict.WITHIN_NOISE  # touches 0
    assert difference_verdict(None, 200) is None
