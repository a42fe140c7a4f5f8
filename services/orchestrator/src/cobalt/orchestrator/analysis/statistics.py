"""How far a measured rate could be from the true one: the project's one statistics module.

Pass@1 over a dataset has two sources of noise: which problems the dataset holds and which
programs the model happened to sample for them. Its interval is a percentile bootstrap over
problems (a cluster bootstrap): each resample draws the problems with replacement, each
with the samples it has. A problem's observed rate c/n already carries its samples' noise,
so the spread of the rates across problems holds both sources; drawing each drawn
problem's samples again as well (a two-level bootstrap, used here until 2026-12-07) counts
the samples' noise twice and gives intervals too wide: 99% where 95% is claimed for a
paired difference (tests/orchestrator/analysis/test_statistics.py simulates it; Miller,
"Adding Error Bars to Evals", arXiv 2411.00640, section 2: the variance of a mean over
questions of per-question means). Problems with equal counts are interchangeable, which is
how it is computed (`_class_draws`: exactly the same distribution, in time that does not
grow with the number of problems). A difference of two runs over the same problems is
paired: each resample draws the problems once and takes each drawn problem's change. Its
samples may be paired too: runs sampled with common random numbers (the same sampling
seed, so sample j of a problem draws the same random numbers in both runs) give an
unchanged problem an unchanged rate, and the interval then holds only what changed.
Every bootstrap is seeded, so a page shows the same interval on every load.

A single rate (one problem's c passes of n) gets Wilson's score interval, and the change
of one problem between two runs Newcombe's hybrid score interval of the difference
(method 10 of Newcombe, 1998), built from the two Wilson intervals: with n = 4 samples,
1/4 -> 2/4 is within noise and 0/4 -> 4/4 is not.

No interval claims certainty (`_never_certain`, the one rule every interval here obeys):
it holds its estimate, and where the bootstrap has no width because nothing varied
(every sample of every problem passed, or every one failed, or every problem changed
alike) it is the score interval of the pooled counts instead: 0 passes of 80 samples
reads [0, 0.046], not [0, 0]. The CLI, the UI, the CSV exports and the demo's and the
experiment's reports all show these intervals, so they all follow the rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from cobalt.shared.contracts.browse import DifferenceVerdict

__all__ = [
    "CONFIDENCE",
    "MIN_PROBLEMS_FOR_A_VERDICT",
    "RESAMPLES",
    "SEED",
    "Interval",
    "bootstrap_difference",
    "bootstrap_pass_at_1",
    "difference_verdict",
    "newcombe_difference",
    "wilson_interval",
]

Interval = tuple[float, float]

CONFIDENCE = 0.95
"""Every interval the project shows is a 95% one."""
RESAMPLES = 2000
"""Bootstrap resamples: the percentile ends move by well under 0.01 between seeds."""
SEED = 0
"""The bootstrap's seed: the same stored results always give the same interval."""
MIN_PROBLEMS_FOR_A_VERDICT = 10
"""Below this many problems a paired interval is not read as a verdict: the bootstrap
resamples problems, so over a handful it shows their samples' noise and not how problems
differ (a pilot's 1-instance held-out split gave [+0.25, +1.00])."""


def _z(confidence: float) -> float:
    # The normal quantile without scipy: inverse of erf by bisection (monotone, 60 halvings).
    target = confidence
    low, high = 0.0, 10.0
    for _ in range(60):
        middle = (low + high) / 2
        if math.erf(middle / math.sqrt(2)) < target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def wilson_interval(successes: int, trials: int, confidence: float = CONFIDENCE) -> Interval | None:
    """Wilson's score interval for `successes` of `trials` (None for no trial)."""
    if trials <= 0:
        return None
    if not 0 <= successes <= trials:
        raise ValueError(f"{successes} successes of {trials} trials")
    z = _z(confidence)
    p = successes / trials
    denominator = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denominator
    # The exact ends at 0 and 1 (rounding would otherwise leave 1e-17 outside [0, 1]).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == trials else min(1.0, centre + half)
    return low, high


def newcombe_difference(
    successes_a: int,
    trials_a: int,
    successes_b: int,
    trials_b: int,
    confidence: float = CONFIDENCE,
) -> Interval | None:
    """Interval of p_b - p_a for two independent rates (None when either has no trial)."""
    wilson_a = wilson_interval(successes_a, trials_a, confidence)
    wilson_b = wilson_interval(successes_b, trials_b, confidence)
    if wilson_a is None or wilson_b is None:
        return None
    p_a, p_b = successes_a / trials_a, successes_b / trials_b
    (low_a, high_a), (low_b, high_b) = wilson_a, wilson_b
    difference = p_b - p_a
    low = difference - math.sqrt((p_b - low_b) ** 2 + (high_a - p_a) ** 2)
    high = difference + math.sqrt((high_b - p_b) ** 2 + (p_a - low_a) ** 2)
    return max(-1.0, low), min(1.0, high)


def _percentiles(values: Any, confidence: float) -> Interval:
    import numpy as np

    tail = (1 - confidence) / 2
    low, high = np.quantile(values, [tail, 1 - tail])
    return float(low), float(high)


def _class_draws(rows: Sequence[tuple[int, ...]], resamples: int, seed: int) -> tuple[Any, Any]:
    """Problems drawn with replacement, counted per class of equal rows.

    Problems with the same counts are interchangeable, so drawing P problems is drawing
    how many of each class: a multinomial over the K classes (K <= n + 1 for one run).
    Exactly the per-problem bootstrap's distribution, in O(K) per resample.

    Returns:
        The classes (K x columns) and how often each was drawn (resamples x K).
    """
    import numpy as np

    classes: dict[tuple[int, ...], int] = {}
    for row in rows:
        classes[row] = classes.get(row, 0) + 1
    table = np.array(list(classes), dtype=np.int64)
    frequency = np.array(list(classes.values()), dtype=np.float64) / len(rows)
    rng = np.random.default_rng(seed)
    return table, rng.multinomial(len(rows), frequency, size=resamples)


def _never_certain(interval: Interval, estimate: float, pooled: Interval | None) -> Interval:
    """`interval` widened to hold `estimate`; `pooled` (the score interval of the pooled
    counts, which has width whenever there is a trial) where it has no width."""
    low, high = min(interval[0], estimate), max(interval[1], estimate)
    if high > low or pooled is None:
        return low, high
    return min(pooled[0], estimate), max(pooled[1], estimate)


def bootstrap_pass_at_1(
    counts: Sequence[tuple[int, int]],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> Interval | None:
    """Interval of the mean over problems of c/n, from each problem's (c passes, n samples).

    None when there is no problem (nothing was measured). One problem is a single rate:
    Wilson's interval (resampling one problem's samples cannot show noise that did not
    occur, e.g. 2/2 would read [1, 1]). With several problems all passing or all failing
    the bootstrap has no width either (its blind spot at 0 and 1): then Wilson's interval
    of the pooled counts (`_never_certain`).
    """
    usable = [(c, n) for c, n in counts if n > 0]
    if not usable:
        return None
    if len(usable) == 1:
        return wilson_interval(*usable[0], confidence)
    table, drawn = _class_draws(usable, resamples, seed)
    rates = drawn * (table[:, 0] / table[:, 1])
    estimate = sum(c / n for c, n in usable) / len(usable)
    pooled = wilson_interval(sum(c for c, _ in usable), sum(n for _, n in usable), confidence)
    return _never_certain(
        _percentiles(rates.sum(axis=1) / len(usable), confidence), estimate, pooled
    )


def bootstrap_difference(
    pairs: Sequence[tuple[int, int, int, int]],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    confidence: float = CONFIDENCE,
) -> Interval | None:
    """Interval of Pass@1(B) - Pass@1(A) over the problems both runs measured.

    `pairs` holds one (c_a, n_a, c_b, n_b) per problem; each resample draws the problems
    once for both runs and sums the drawn problems' changes. None when no problem has both. Where
    nothing varied (every problem changed alike, all at 0 or 1), Newcombe's interval of
    the pooled counts (`_never_certain`).
    """
    usable = [p for p in pairs if p[1] > 0 and p[3] > 0]
    if not usable:
        return None
    table, drawn = _class_draws(usable, resamples, seed)
    changes = drawn * (table[:, 2] / table[:, 3] - table[:, 0] / table[:, 1])
    estimate = sum(c_b / n_b - c_a / n_a for c_a, n_a, c_b, n_b in usable) / len(usable)
    c_a, n_a, c_b, n_b = (sum(pair[i] for pair in usable) for i in range(4))
    pooled = newcombe_difference(c_a, n_a, c_b, n_b, confidence)
    return _never_certain(
        _percentiles(changes.sum(axis=1) / len(usable), confidence), estimate, pooled
    )


def difference_verdict(interval: Interval | None, problems: int) -> DifferenceVerdict | None:
    """What the paired interval of a difference over `problems` problems says; None where
    there is no interval. Every surface that calls a change better or worse asks here (the
    demo, the experiment's report, `cobalt run compare`, the UI), so none reads a verdict
    off a handful of problems."""
    if interval is None:
        return None
    if problems < MIN_PROBLEMS_FOR_A_VERDICT:
        return DifferenceVerdict.TOO_FEW_PROBLEMS
    if interval[0] > 0:
        return DifferenceVerdict.BETTER
    return DifferenceVerdict.WORSE if interval[1] < 0 else DifferenceVerdict.WITHIN_NOISE
