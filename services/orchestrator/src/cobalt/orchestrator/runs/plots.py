"""Pass@1 against turn, as a PNG: the figure researchers look at first."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cobalt.shared.contracts.runs import EvaluationReport

__all__ = ["plot_pass_at_1"]


def plot_pass_at_1(
    reports: Sequence[EvaluationReport], path: Path, *, labels: Sequence[str] | None = None
) -> Path:
    """One line per run (hidden-test Pass@1 per turn); returns `path`."""
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 4.0), dpi=120)
    for index, report in enumerate(reports):
        label = labels[index] if labels else f"run {report.run_id}"
        if report.pass_at_1 is None:  # not evaluated: no line rather than a flat 0
            continue
        axes.plot(range(report.turns), report.pass_at_1, marker="o", label=label)
    axes.set_xlabel("turn")
    axes.set_ylabel("Pass@1 (hidden tests)")
    axes.set_ylim(0, 1)
    axes.set_xticks(range(max((r.turns for r in reports), default=1)))
    axes.grid(alpha=0.3)
    if axes.get_lines():  # no run evaluated: an empty plot, not a legend of nothing
        axes.legend()
    sizes = ", ".join(f"{r.problems}x{r.samples}" for r in reports)
    axes.set_title(f"Pass@1 per turn (problems x samples: {sizes})", fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
    return path
