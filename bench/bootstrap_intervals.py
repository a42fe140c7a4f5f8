"""Pass@1's bootstrap interval: one draw per problem (the direct way) against one draw per
class of equal counts (`analysis.statistics`, the same distribution), side by side; and the
two-level bootstrap it replaced on 2026-12-07 (each drawn class's samples drawn again, a
Binomial per class), for its time and its wider interval.

    nice -n 10 .venv/bin/python bench/bootstrap_intervals.py [--problems 1000] [--samples 16]

Prints the best of 5 timings of each and their ratio, and both intervals (equal up to
sampling noise: different draws of the same distribution).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from cobalt.orchestrator.analysis.statistics import RESAMPLES, bootstrap_pass_at_1


def per_problem(counts: list[tuple[int, int]]) -> tuple[float, float]:
    """Every resample draws P problems, each with the rate its samples gave."""
    rates = np.array([c / n for c, n in counts])
    rng = np.random.default_rng(0)
    drawn = rng.integers(len(counts), size=(RESAMPLES, len(counts)))
    low, high = np.quantile(rates[drawn].mean(axis=1), [0.025, 0.975])
    return float(low), float(high)


def two_level_per_class(counts: list[tuple[int, int]]) -> tuple[float, float]:
    """The replaced bootstrap: classes drawn, then Binomial(m n, c / n) passes per class."""
    classes: dict[tuple[int, int], int] = {}
    for row in counts:
        classes[row] = classes.get(row, 0) + 1
    table = np.array(list(classes))
    rng = np.random.default_rng(0)
    frequency = np.array(list(classes.values())) / len(counts)
    drawn = rng.multinomial(len(counts), frequency, size=RESAMPLES)
    passes, samples = table[:, 0], table[:, 1]
    rates = rng.binomial(drawn * samples, passes / samples) / samples
    low, high = np.quantile(rates.sum(axis=1) / len(counts), [0.025, 0.975])
    return float(low), float(high)


def best(function: Callable[[], Any], rounds: int = 5) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = function()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--problems", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=16)
    options = parser.parse_args()
    rng = random.Random(0)
    counts = [(rng.randint(0, options.samples), options.samples) for _ in range(options.problems)]
    direct, direct_interval = best(lambda: per_problem(counts))
    classes, class_interval = best(lambda: bootstrap_pass_at_1(counts))
    print(f"{options.problems} problems x {options.samples} samples, {RESAMPLES} resamples")
    print(f"per problem: {direct * 1000:.1f} ms  {direct_interval}")
    print(f"per class:   {classes * 1000:.1f} ms  {class_interval}")
    print(f"ratio: {direct / classes:.1f}x")
    replaced, replaced_interval = best(lambda: two_level_per_class(counts))
    print(f"two-level per class (replaced): {replaced * 1000:.1f} ms  {replaced_interval}")
    print(f"now / replaced time: {classes / replaced:.2f}x")


if __name__ == "__main__":
    main()
