"""What the demo trains and evaluates on: HumanEval's easiest problems (bundled), or
generated one-function problems of the templates SmolLM2 passes sometimes, with held-out
instances of them for the before/after comparison (docs/datasets.md)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from cobalt.demo.errors import DemoFailed
from cobalt.demo.options import DemoOptions, DemoPaths
from cobalt.demo.progress import StageBar
from cobalt.orchestrator.datasets.importers import resolve_source
from cobalt.orchestrator.datasets.importing import ImportOptions, import_file

__all__ = ["import_generated", "import_humaneval"]


def _easiest_problems(problems: int, out_dir: Path) -> Path:
    """The bundled HumanEval's `problems` problems with the shortest reference solutions,
    as a HumanEval-format file: a 135M model solves a few of those, so Pass@1 is not zero
    at every turn and GRPO groups have rewards that differ."""
    source = resolve_source("humaneval", Path("bundled"))
    opener = gzip.open if source.suffix == ".gz" else open
    with opener(source, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    rows.sort(key=lambda row: (len(row["canonical_solution"].strip()), row["task_id"]))
    chosen = sorted(rows[:problems], key=lambda row: int(row["task_id"].split("/")[-1]))
    out = out_dir / f"humaneval-easiest-{problems}.jsonl"
    out.write_text("".join(json.dumps(row) + "\n" for row in chosen), encoding="utf-8")
    return out


def import_humaneval(
    sessions: sessionmaker[Session], options: DemoOptions, paths: DemoPaths, bar: StageBar
) -> str:
    """Import the demo's subset; returns the dataset's name (re-importing changes nothing)."""
    name = f"humaneval-easiest-{options.problems}"
    report = import_file(
        sessions=sessions,
        name=name,
        fmt="humaneval",
        path=_easiest_problems(options.problems, paths.root),
        options=ImportOptions(),
    )
    if report.inserted + report.unchanged < options.problems:
        raise DemoFailed(f"only {report.inserted + report.unchanged} HumanEval problems imported")
    bar.update(note=f"{name}: {report.inserted + report.unchanged} problems")
    return name


def import_generated(
    sessions: sessionmaker[Session], options: DemoOptions, paths: DemoPaths, bar: StageBar
) -> tuple[str, str]:
    """Generated data: `problems` training instances and `eval_problems` held-out ones of
    the templates SmolLM2 passes sometimes (the recorded screening); their dataset names."""
    from cobalt.demo.experiment.generated import import_spec
    from cobalt.orchestrator.datasets.generated.screened import SMOLLM2_KEPT

    common = {"seed": options.seed, "templates": list(SMOLLM2_KEPT)}
    prefix = f"demo-gen-s{options.seed}"
    train = f"{prefix}-train-n{options.problems}"
    held_out = f"{prefix}-held-out-n{options.eval_problems}"
    import_spec(
        sessions, paths.root, train, {"split": "train", "count": options.problems, **common}
    )
    import_spec(
        sessions,
        paths.root,
        held_out,
        {"split": "heldout", "count": options.eval_problems, **common},
    )
    bar.update(note=f"{train}, {held_out} ({len(SMOLLM2_KEPT)} templates)")
    return train, held_out
