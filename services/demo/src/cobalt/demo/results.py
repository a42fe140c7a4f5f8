"""What a demo run produced: the figures the report shows and the ids behind them."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cobalt.demo.options import DemoOptions
from cobalt.shared.contracts.runs import EvaluationReport
from cobalt.shared.contracts.training import TrainingJobPublic

__all__ = ["DemoResult", "PhaseResult"]


@dataclass
class PhaseResult:
    """One rollout-and-evaluate pass (before or after training)."""

    label: str
    sample_run: int
    refine_run: int
    policy_version: int
    report: EvaluationReport
    reused: bool = False


@dataclass
class DemoResult:
    """Everything the report shows; ids point into the database and the web UI."""

    options: DemoOptions
    model_dir: Path
    served_model: str
    before: PhaseResult
    after: PhaseResult
    bandit_name: str
    bandit_contexts: int
    bandit_counts: dict[str, Any]
    training: TrainingJobPublic
    ui_url: str
    database_url: str
    timings: dict[str, float] = field(default_factory=dict)
    report_path: Path | None = None
    dataset: str = ""
    """The dataset trained on (its name; what a new run samples from)."""
    eval_dataset: str = ""
    """Generated data: the held-out instances `before` and `after` were evaluated on."""
    trained_on: PhaseResult | None = None
    """The base policy's roll-out the contexts were cut from (`before` itself when the
    demo evaluates on the trained problems)."""
    change: list[float | None] = field(default_factory=list)
    """Per turn, Pass@1 after minus before over the same problems (runs.comparison)."""
    change_interval: list[tuple[float, float] | None] = field(default_factory=list)
    """Per turn, its paired 95% bootstrap interval: a change inside it is noise."""
    compared_problems: list[int] = field(default_factory=list)
    """Per turn, the problems both runs evaluated: the change's base, and what decides
    whether its interval can be read as a verdict (`analysis.statistics.difference_verdict`)."""
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Generated data: per phase label, its turn-0 answers by outcome (passed, no code,
    syntax error, wrong function name, runtime error, wrong answer) and the format-valid
    share (`cobalt.demo.experiment.outcomes.turn_outcomes`)."""
    trained_model: Path | None = None
    """The last step's policy directory (a Hugging Face model directory inference can
    serve); None when the trainer left none (e.g. removed since)."""
