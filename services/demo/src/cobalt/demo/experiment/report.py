"""The experiment's report: report.md, its PNGs and results.json beside it, every number
read back from the store (the runs' hidden results, the jobs' step metrics), none carried
over from memory, so the report says what `cobalt run show` and `cobalt train show` say.
"""

from __future__ import annotations

import json
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy.orm import Session, sessionmaker

from cobalt.demo.experiment.outcomes import OUTCOME_KINDS
from cobalt.demo.options import sampling_line
from cobalt.orchestrator.analysis.statistics import MIN_PROBLEMS_FOR_A_VERDICT, difference_verdict
from cobalt.orchestrator.analysis.text import rate_text
from cobalt.orchestrator.runs.comparison import compare_runs, counts_by_external_id
from cobalt.orchestrator.runs.evaluation import stored_report
from cobalt.orchestrator.runs.plots import plot_pass_at_1
from cobalt.orchestrator.training.service import job_public

if TYPE_CHECKING:
    from cobalt.demo.experiment.pipeline import ExperimentResult

__all__ = [
    "CURVES",
    "SPLITS",
    "collect",
    "render_markdown",
    "verdict",
    "write_report",
]

SPLITS = (
    ("train", "training problems"),
    ("validation", "validation instances"),
    ("held_out", "held-out problems"),
)
"""Every split an arm may be evaluated on, in the order they are read (validation with
generated data only: `_splits` keeps those the result has)."""


def _splits(data_or_arms: Any) -> list[tuple[str, str]]:
    """The SPLITS every arm has runs on (with generated data only the base runs on the
    training problems, to cut Cobalt's contexts: that run is not a comparison)."""
    runs = [arm.runs if hasattr(arm, "runs") else arm["runs"] for arm in data_or_arms]
    return [(split, label) for split, label in SPLITS if all(split in r for r in runs)]


CURVES = (
    ("reward_mean", "mean reward"),
    ("pass_rate", "pass rate (public tests)"),
    ("advantage_zero_fraction", "share of zero-advantage responses"),
    ("entropy", "entropy"),
    ("response_length", "response length (tokens)"),
)
"""Per-step curves. A response has advantage 0 when its whole group had one reward, so the
share of zero-advantage responses is the share of zero-advantage groups (groups are equal)."""


def _interval(value: list[float] | tuple[float, float] | None) -> list[float] | None:
    return None if value is None else [float(value[0]), float(value[1])]


def passes_by_problem(sessions: sessionmaker[Session], run_id: int) -> dict[str, list[int]]:
    """Per problem (external id), its passing samples per turn: what every interval of the
    record is computed from, kept so that it can be read again by another method."""
    counted = counts_by_external_id(sessions, run_id)
    return {external_id: [c for c, _ in turns] for external_id, turns in counted.items()}


def collect(result: ExperimentResult, sessions: sessionmaker[Session]) -> dict[str, Any]:
    """Every figure of the report, read from the store, as plain JSON values."""
    base = result.arms[0]
    arms = []
    for arm in result.arms:
        entry: dict[str, Any] = {
            "name": arm.arm.name,
            "key": arm.key,
            "mode": arm.arm.mode,
            "job": arm.job,
            "runs": dict(arm.runs),
            "splits": {},
        }
        for split, _ in _splits(result.arms):
            k = result.options.group_size
            report = stored_report(sessions, arm.runs[split], ks=(1, k))
            figures: dict[str, Any] = {
                "run": arm.runs[split],
                "problems": report.problems,
                "samples": report.samples,
                "pass_at_1": report.pass_at_1,
                "interval": [_interval(i) for i in report.pass_at_1_interval or []],
                # pass@k at k = the group size: what RL can turn into pass@1.
                "k": k,
                "pass_at_k": (report.pass_at_k or {}).get(str(k)),
                "turn0": result.outcomes.get(arm.arm.name, {}).get(split),
                "passes": passes_by_problem(sessions, arm.runs[split]),
            }
            if arm is not base:
                comparison = compare_runs(sessions, base.runs[split], arm.runs[split])
                figures["difference"] = comparison.difference
                figures["difference_interval"] = [
                    _interval(i) for i in comparison.difference_interval
                ]
            entry["splits"][split] = figures
        if arm.job is not None:
            job = job_public(sessions, arm.job)
            steps = []
            for step in job.steps:
                metrics = dict(step.metrics)
                samples = metrics.get("samples", 0.0)
                if samples:
                    metrics["response_length"] = metrics.get("response_tokens", 0.0) / samples
                steps.append({"step": step.step, **metrics})
            entry["steps"] = steps
            entry["status"] = job.status
            entry["trained_responses"] = int(sum(s.get("samples", 0.0) for s in steps))
            entry["planned_responses"] = arm.arm.budget
            entry["contexts_per_step"] = arm.arm.contexts_per_step
        arms.append(entry)
    return {
        "options": result.options.as_dict(),
        "model": str(result.model_dir),
        "split": {
            "candidates": list(result.split.candidates),
            "held_out": list(result.split.held_out),
        },
        "screening": {
            "run": result.screening_run,
            "rates": result.screening_rates,
            "training_problems": result.training_problems,
            "dropped": result.dropped,
        },
        "datasets": result.datasets,
        "bandit": {"name": result.bandit_dataset, "contexts": result.bandit_contexts},
        "arms": arms,
        "timings_s": result.timings,
    }


def _cell(value: float | None, interval: list[float] | None) -> str:
    return rate_text(value, interval)


_VERDICT_TEXT = {
    "better": "**better**",
    "worse": "**worse**",
    "within_noise": "within noise",
}


def verdict(interval: list[float] | None, problems: int | None) -> str:
    """Better, worse or within noise by the paired interval over `problems` problems
    (`analysis.statistics.difference_verdict`; a record without the count is read as
    having enough)."""
    said = difference_verdict(
        None if interval is None else (interval[0], interval[1]),
        MIN_PROBLEMS_FOR_A_VERDICT if problems is None else problems,
    )
    if said is None:
        return "-"
    return _VERDICT_TEXT.get(said.value, f"too few problems ({problems})")


def _at(values: list[Any] | None, turn: int) -> Any:
    return values[turn] if values is not None and turn < len(values) else None


def _significant(data: dict[str, Any]) -> list[str]:
    found = []
    for arm in data["arms"][1:]:
        for split, split_label in _splits(data["arms"]):
            figures = arm["splits"][split]
            for turn, interval in enumerate(figures.get("difference_interval", [])):
                said = verdict(interval, figures.get("problems"))
                if said in ("**better**", "**worse**"):
                    found.append(
                        f"{arm['name']} is {said.strip('*')} than base on the {split_label} "
                        f"at turn {turn}: {figures['difference'][turn]:+.3f} "
                        f"[{interval[0]:+.3f}, {interval[1]:+.3f}]"
                    )
    return found


def render_markdown(data: dict[str, Any], images: dict[str, str], *, wall_s: float) -> str:
    options = data["options"]
    lines = [
        "# Cobalt experiment",
        "",
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC · model `{Path(data['model']).name}` · "
        f"seed {options['seed']} · wall time {wall_s / 60:.1f} min (this invocation's stages "
        "below; a resumed run counts only what it ran)",
        "",
        "## Design",
        "",
        *_design_lines(data),
        f"- Evaluation: {options['samples']} samples per problem, turn 0 and "
        f"{options['turns']} feedback turns, Pass@1 per turn on hidden tests; intervals are "
        "95% seeded bootstraps over problems; differences are paired by problem, "
        f"{sampling_line(options.get('paired_sampling', False), options['seed'])} "
        "(docs/analysis.md).",
        f"- Cobalt's contexts: bandit dataset `{data['bandit']['name']}` "
        f"({data['bandit']['contexts']} contexts) cut from the base arm's run on the training "
        "problems by the paper's builder.",
        "",
        "| arm | mode | job | steps | contexts/step | responses/step | trained responses |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for arm in data["arms"]:
        if arm["job"] is None:
            lines.append(f"| {arm['name']} | - | - | 0 | - | - | 0 |")
            continue
        steps = arm["steps"]
        per_step = statistics.fmean(s.get("samples", 0.0) for s in steps) if steps else 0.0
        lines.append(
            f"| {arm['name']} | {arm['mode']} | {arm['job']} | {len(steps)} | "
            f"{arm['contexts_per_step']} | "
            f"{per_step:.0f} | {arm['trained_responses']} |"
        )
    for split, label in _splits(data["arms"]):
        lines += [
            "",
            f"## Pass@1 per turn, {label}",
            "",
            "| arm | turn | Pass@1 [95%] | vs base [95%] | |",
            "|---|---:|---|---|---|",
        ]
        for arm in data["arms"]:
            figures = arm["splits"][split]
            for turn, value in enumerate(figures["pass_at_1"] or []):
                difference = _at(figures.get("difference"), turn)
                interval = _at(figures.get("difference_interval"), turn)
                change = "-" if difference is None else _cell(difference, interval)
                said = verdict(interval, figures.get("problems")) if arm["job"] is not None else ""
                lines.append(
                    f"| {arm['name']} | {turn} | {_cell(value, _at(figures['interval'], turn))} "
                    f"| {change} | {said} |"
                )
        lines += ["", f"![Pass@1, {label}]({images[split]})"]
    lines += _outcome_lines(data)
    lines += ["", "## Training curves", "", f"![training curves]({images['curves']})", ""]
    lines += _validation_beside_curves(data)
    significant = _significant(data)
    lines += ["## What is significant", ""]
    if significant:
        lines += [f"- {line}" for line in significant]
    else:
        lines.append(
            "No arm differs from the base model by more than the noise at any turn on any "
            "split: every paired 95% interval of the difference contains 0 (a split of fewer "
            f"than {MIN_PROBLEMS_FOR_A_VERDICT} problems is not read as a verdict)."
        )
    lines += ["", "## Where the time went", "", "| stage | seconds |", "|---|---:|"]
    lines += [f"| {stage} | {seconds:.0f} |" for stage, seconds in data["timings_s"].items()]
    lines += ["", "The exact figures are in results.json beside this file."]
    return "\n".join(lines) + "\n"


def _design_lines(data: dict[str, Any]) -> list[str]:
    """The pool, the held-out set and the screening, for either kind of data."""
    options, screening = data["options"], data["screening"]
    kept = screening["training_problems"]
    selection = "" if options["select"] else " (selection off: all kept)"
    if options.get("data") == "generated":
        if screening["run"] is None:
            screened = [
                f"- Data: generated one-function problems (docs/datasets.md), difficulty "
                f"{options['difficulty']}.",
                "- Screening: SmolLM2-135M-Instruct's recorded one (docs/experiments/"
                "generated-screening-t0.6.json: 2 train instances x 4 samples per template "
                "at temperature 0.6, first answers), the rule fixed before it ran: a "
                f"template is kept when its pass rate is within [0.1, 0.9]{selection}: "
                f"{len(kept)} kept ({', '.join(kept)}), {len(screening['dropped'])} left out "
                "(`--rescreen` screens again).",
            ]
        else:
            screened = [
                f"- Data: generated one-function problems (docs/datasets.md), difficulty "
                f"{options['difficulty']}; {len(data['split']['candidates'])} training "
                f"candidates ({options['screen_instances']} train-split instances per "
                "template).",
                f"- Screening (run {screening['run']}, base model, {options['screen_samples']} "
                "samples per candidate, every turn): a template is kept when its pass rate is "
                f"within [0.1, 0.9], the rule fixed before the run{selection}: {len(kept)} "
                f"kept ({', '.join(kept)}), {len(screening['dropped'])} left out.",
            ]
        return [
            *screened,
            f"- Training: {options['train_instances']} fresh train-split instances of the "
            f"kept templates; validation: {options.get('validation')} instances of them from "
            "the validation split (every arm's choices are judged there); held-out: "
            f"{len(data['split']['held_out'])} instances of the kept templates from the "
            "held-out split, read once after every arm, whose tasks no training or "
            "validation instance shares.",
        ]
    return [
        f"- Pool: the {options['pool']} bundled HumanEval problems with the shortest reference "
        f"solutions, split by seed {options['seed']} into {len(data['split']['candidates'])} "
        f"training candidates and {len(data['split']['held_out'])} held-out problems.",
        f"- Held-out: {', '.join(data['split']['held_out'])}.",
        f"- Screening (run {screening['run']}, base model, {options['screen_samples']} "
        "samples per candidate, every turn): training problems are the candidates whose pass "
        f"rate was neither 0 nor 1{selection}: {len(kept)} kept ({', '.join(kept)}), "
        f"{len(screening['dropped'])} left out.",
    ]


def _validation_beside_curves(data: dict[str, Any]) -> list[str]:
    """Each arm's validation Pass@1 per turn next to its curves: what choices of steps,
    learning rate or checkpoint are made on (never the held-out problems)."""
    if "validation" not in data["arms"][0]["runs"]:
        return []
    lines = [
        "Validation Pass@1 per turn (where hyper-parameters and checkpoints are chosen; "
        "the held-out split is read once, after every arm):",
        "",
        "| arm | last step's mean reward | validation Pass@1 per turn |",
        "|---|---:|---|",
    ]
    for arm in data["arms"]:
        figures = arm["splits"]["validation"]
        steps = arm.get("steps") or []
        reward = steps[-1].get("reward_mean") if steps else None
        shown = ", ".join(
            _cell(value, _at(figures["interval"], turn))
            for turn, value in enumerate(figures["pass_at_1"] or [])
        )
        lines.append(f"| {arm['name']} | {'-' if reward is None else f'{reward:+.3f}'} | {shown} |")
    return [*lines, ""]


def _outcome_lines(data: dict[str, Any]) -> list[str]:
    """Turn 0 of each arm's runs: format-valid share, pass@k and failures by kind."""
    lines: list[str] = []
    for split, label in _splits(data["arms"]):
        lines += [
            "",
            f"## Turn-0 answers by outcome, {label}",
            "",
            "| arm | answers | format-valid | pass@k (k) | passed | no code | syntax error "
            "| wrong function name | runtime error | wrong answer |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for arm in data["arms"]:
            figures = arm["splits"][split]
            turn0 = figures.get("turn0")
            if not turn0 or not turn0["answers"]:
                continue
            at_k = _at(figures.get("pass_at_k"), 0)
            counts = turn0["outcomes"]
            kinds = " | ".join(str(counts[kind]) for kind in OUTCOME_KINDS)
            lines.append(
                f"| {arm['name']} | {turn0['answers']} | {turn0['format_valid']:.2f} | "
                f"{'-' if at_k is None else f'{at_k:.3f}'} ({figures['k']}) | {kinds} |"
            )
    return lines


def _plot_curves(data: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, len(CURVES), figsize=(3.2 * len(CURVES), 3.2), dpi=110)
    for arm in data["arms"]:
        steps = arm.get("steps") or []
        if not steps:
            continue
        xs = [s["step"] for s in steps]
        for axis, (key, label) in zip(axes, CURVES, strict=True):
            axis.plot(xs, [s.get(key, float("nan")) for s in steps], marker="o", label=arm["name"])
            axis.set_title(label, fontsize=9)
            axis.set_xlabel("step")
            axis.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def write_report(result: ExperimentResult, sessions: sessionmaker[Session], path: Path) -> Path:
    """report.md, results.json and the PNGs in `path`'s directory; returns `path`."""
    data = collect(result, sessions)
    images = {}
    for split, label in _splits(result.arms):
        name = f"pass_at_1_{split}.png"
        plot_pass_at_1(
            [stored_report(sessions, arm.runs[split], ks=(1,)) for arm in result.arms],
            path.with_name(name),
            labels=[f"{arm.arm.name} ({label})" for arm in result.arms],
        )
        images[split] = name
    images["curves"] = _plot_curves(data, path.with_name("training_curves.png")).name
    wall = sum(result.timings.values())
    data["wall_s"] = wall
    path.with_name("results.json").write_text(json.dumps(data, indent=2), encoding="utf-8")
    path.write_text(render_markdown(data, images, wall_s=wall), encoding="utf-8")
    return path
