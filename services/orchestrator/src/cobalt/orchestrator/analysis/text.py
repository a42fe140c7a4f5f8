"""Rates as the terminal and the exports write them: a dash where nothing was measured
(never 0), and the 95% interval beside every estimate that has one."""

from __future__ import annotations

__all__ = ["difference_text", "rate_text"]


def rate_text(rate: float | None, interval: tuple[float, float] | None = None) -> str:
    """'0.667 [0.500, 0.833]', or '-' when nothing was measured."""
    if rate is None:
        return "-"
    return (
        f"{rate:.3f}" if interval is None else f"{rate:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"
    )


def difference_text(difference: float | None, interval: tuple[float, float] | None = None) -> str:
    """'+0.167 [-0.100, +0.400]', or '-'."""
    if difference is None:
        return "-"
    if interval is None:
        return f"{difference:+.3f}"
    return f"{difference:+.3f} [{interval[0]:+.3f}, {interval[1]:+.3f}]"
