"""Rates as the terminal, the exports and the reports write them: a dash where nothing was
measured (never 0), and the 95% interval beside every estimate that has one, written with
as many decimals as it takes for its two ends to differ (an interval is never shown as
`[0.000, 0.000]`: `analysis.statistics` gives every one some width)."""

from __future__ import annotations

from collections.abc import Sequence

from cobalt.shared.contracts.browse import DifferenceVerdict

__all__ = ["difference_text", "interval_text", "rate_text", "verdict_text"]

_MAX_DECIMALS = 6


def interval_text(interval: Sequence[float], *, signed: bool = False) -> str:
    """'[0.000, 0.046]' ('[-0.100, +0.400]' when `signed`); more decimals, up to six, where
    three would print two equal ends."""
    low, high = interval[0], interval[1]
    sign = "+" if signed else ""
    for decimals in range(3, _MAX_DECIMALS + 1):
        shown = f"{low:{sign}.{decimals}f}", f"{high:{sign}.{decimals}f}"
        if shown[0] != shown[1]:
            break
    return f"[{shown[0]}, {shown[1]}]"


def rate_text(rate: float | None, interval: Sequence[float] | None = None) -> str:
    """'0.667 [0.500, 0.833]', or '-' when nothing was measured."""
    if rate is None:
        return "-"
    return f"{rate:.3f}" if interval is None else f"{rate:.3f} {interval_text(interval)}"


def difference_text(difference: float | None, interval: Sequence[float] | None = None) -> str:
    """'+0.167 [-0.100, +0.400]', or '-'."""
    if difference is None:
        return "-"
    if interval is None:
        return f"{difference:+.3f}"
    return f"{difference:+.3f} {interval_text(interval, signed=True)}"


def verdict_text(verdict: DifferenceVerdict | None, problems: int) -> str:
    """'better', 'worse', 'within noise', 'too few (4)' (problems: fewer than a verdict
    needs), or '-'; short, for a table's column."""
    if verdict is None:
        return "-"
    if verdict == DifferenceVerdict.TOO_FEW_PROBLEMS:
        return f"too few ({problems})"
    return verdict.value.replace("_", " ")
