"""The experiment's datasets with `--data generated` (docs/datasets.md, "Generated problems").

- candidates: `screen_instances` train-split instances of every template (templates take
  turns; one with fewer train tasks gives way to the others), screened by the base model
  like the HumanEval candidates;
- the rule, fixed before the screening runs: a template is kept when its pass rate over
  every sample and turn of its candidates is within [0.1, 0.9] (`ScreeningRule`); without
  `select`, every template is kept;
- train: `train_instances` fresh train-split instances of the kept templates (another
  seed than the candidates' draw);
- validation: `validation` instances of the kept templates from the validation split,
  where every arm is evaluated beside its training curve (choices are made there);
- held-out: `held_out` instances of the kept templates from the held-out split, whose
  tasks no training instance shares (the split is a function of the task).

Each is imported through the ordinary import flow (`--format generated`, a spec file in
the work dir), so the runs, the report and the store treat them like any dataset.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cobalt.demo.errors import DemoFailed
from cobalt.demo.experiment.plan import ExperimentOptions

__all__ = [
    "candidate_templates",
    "candidates_spec",
    "import_spec",
    "recorded_templates",
    "select_templates",
    "template_rates",
    "train_and_held_out_specs",
    "validation_spec",
]

TRAIN_SEED_OFFSET = 1_000_003
"""The training instances' draw is seeded apart from the candidates' (same split)."""


def import_spec(sessions: Any, root: Path, name: str, spec: Mapping[str, Any]) -> list[str]:
    """Import the generated problems of `spec` as dataset `name`; their external ids.

    Raises:
        DemoFailed: the spec cannot be filled (too few tasks) or nothing was imported.
    """
    from cobalt.orchestrator.datasets.importing import ImportOptions, import_file
    from cobalt.shared.errors import InvalidInput

    path = root / f"{name}.json"
    path.write_text(json.dumps(dict(spec), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    try:
        report = import_file(
            sessions=sessions, name=name, fmt="generated", path=path, options=ImportOptions()
        )
    except InvalidInput as exc:
        raise DemoFailed(f"generating {name}: {exc}") from exc
    if report.bad or report.inserted + report.unchanged != spec["count"]:
        raise DemoFailed(f"only {report.inserted + report.unchanged} problems of {name} imported")
    from cobalt.orchestrator.datasets.generated.instances import (
        GenerationSpec,
        generate_problems,
    )

    return [row.external_id for row in generate_problems(GenerationSpec.model_validate(spec))]


def candidates_spec(options: ExperimentOptions) -> dict[str, Any]:
    from cobalt.orchestrator.datasets.generated.templates import TEMPLATES

    return {
        "split": "train",
        "seed": options.seed,
        "count": options.screen_instances * len(TEMPLATES),
        "difficulty": options.difficulty,
    }


def candidate_templates(options: ExperimentOptions) -> dict[str, str]:
    """Each candidate's external id -> its template (drawn again: the draw is deterministic)."""
    from cobalt.orchestrator.datasets.generated.instances import (
        GenerationSpec,
        generate_problems,
    )

    spec = GenerationSpec.model_validate(candidates_spec(options))
    return {
        row.external_id: str(row.source_metadata["template"]) for row in generate_problems(spec)
    }


def template_rates(rates: Mapping[str, float], templates: Mapping[str, str]) -> dict[str, float]:
    """Per template: the mean of its candidates' pass rates (each over the same samples)."""
    by_template: dict[str, list[float]] = defaultdict(list)
    for external_id, rate in rates.items():
        by_template[templates[external_id]].append(rate)
    return {name: sum(values) / len(values) for name, values in sorted(by_template.items())}


def select_templates(
    rates: Mapping[str, float], *, select: bool, low: float = 0.1, high: float = 0.9
) -> tuple[list[str], dict[str, str]]:
    """The kept templates, and why each other was left out."""
    kept, dropped = [], {}
    for name, rate in sorted(rates.items()):
        if select and rate < low:
            dropped[name] = f"base pass rate {rate:.2f} < {low} in screening"
        elif select and rate > high:
            dropped[name] = f"base pass rate {rate:.2f} > {high} in screening"
        else:
            kept.append(name)
    return kept, dropped


def recorded_templates(*, select: bool) -> tuple[dict[str, float], list[str], dict[str, str]]:
    """SmolLM2's recorded screening (`datasets.generated.screened`): the rates, the kept
    templates and why each other was left out, as `select_templates` gives them for a
    screening run (its rule is the same, [0.1, 0.9])."""
    from cobalt.orchestrator.datasets.generated.screened import SMOLLM2_RATES

    rates = dict(sorted(SMOLLM2_RATES.items()))
    kept, dropped = select_templates(rates, select=select)
    return rates, kept, {name: f"{why} (recorded)" for name, why in dropped.items()}


def train_and_held_out_specs(
    options: ExperimentOptions, kept: Sequence[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    common = {"difficulty": options.difficulty, "templates": list(kept)}
    train = {
        "split": "train",
        "seed": options.seed + TRAIN_SEED_OFFSET,
        "count": options.train_instances,
        **common,
    }
    held_out = {"split": "heldout", "seed": options.seed, "count": options.held_out, **common}
    return train, held_out


def validation_spec(options: ExperimentOptions, kept: Sequence[str]) -> dict[str, Any]:
    """`validation` instances of the kept templates from the validation split (no task
    of it is a training or held-out task: the split is a function of the task)."""
    return {
        "split": "validation",
        "seed": options.seed,
        "count": options.validation,
        "difficulty": options.difficulty,
        "templates": list(kept),
    }
