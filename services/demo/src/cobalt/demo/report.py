"""The demo's HTML report: what was trained, where the trained model is and how to serve
it; before/after Pass@1 per turn, the training steps, the contexts, where the time went,
and links into the web UI.

One self-contained file (the plots are embedded as PNG data, and also written beside it),
so it can be mailed or attached to an issue. The exact figures are embedded as JSON too
(`<script id="demo-data">`), for scripts and for the tests that compare them with the
database.
"""

from __future__ import annotations

import base64
import html
import json
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cobalt.demo.options import sampling_line
from cobalt.demo.results import DemoResult, PhaseResult
from cobalt.orchestrator.analysis.statistics import MIN_PROBLEMS_FOR_A_VERDICT, difference_verdict
from cobalt.orchestrator.analysis.text import interval_text
from cobalt.orchestrator.runs.plots import plot_pass_at_1
from cobalt.shared.contracts.browse import DifferenceVerdict
from cobalt.shared.contracts.runs import EvaluationReport
from cobalt.shared.reward import RewardFormat

__all__ = [
    "bandit_summary",
    "change_verdicts",
    "change_verdict_cells",
    "noise_verdict",
    "render_report",
    "report_data",
    "serve_command",
    "trained_summary",
    "write_report",
]

_REWARD_FORMAT_NOTES = {
    RewardFormat.INSTRUCT: (
        "The reward uses its instruct format (docs/reward.md): SmolLM2 writes no thinking "
        "block, so the <code>&lt;/think&gt;</code> rule is not checked and the thinking "
        "counts as empty; a passing program scores 1.0 and a failing one -0.1 or less."
    ),
    RewardFormat.REASONING: (
        "The reward is the paper's, written for reasoning models: a response without "
        "exactly one <code>&lt;/think&gt;</code> takes its -0.9 format term."
    ),
}

STEP_COLUMNS = (
    ("reward_mean", "mean reward"),
    ("pass_rate", "pass rate"),
    ("solved_fraction", "solved"),
    ("kl_ref", "KL to ref."),
    ("pg_clipfrac", "clip frac."),
    ("train_seconds", "train s"),
    ("sync_seconds", "weight sync s"),
)
"""Step metrics the table shows (the trainer reports more; the web UI shows them all)."""

_STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto;
       padding: 0 1rem; color: #1b1f24; }
h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; }
th, td { border-bottom: 1px solid #d0d7de; padding: .3rem .8rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.up { color: #1a7f37; } .down { color: #cf222e; } .muted { color: #57606a; }
img { max-width: 100%; border: 1px solid #d0d7de; }
code { background: #f6f8fa; padding: .1rem .3rem; }
"""


def _ui(result: DemoResult, fragment: str) -> str:
    return f"{result.ui_url.rstrip('/')}/ui/#/{fragment}"


def _link(href: str, text: str) -> str:
    return f'<a href="{html.escape(href)}">{html.escape(text)}</a>'


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Cells are HTML already (callers escape text they did not make)."""
    head = "".join(f"<th>{cell}</th>" for cell in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _delta(before: float, after: float) -> str:
    change = after - before
    kind = "up" if change > 0 else "down" if change < 0 else "muted"
    return f'<span class="{kind}">{change:+.3f}</span>'


def rate_at(rates: list[float] | None, turn: int) -> float | None:
    """A rate at `turn`, None where it was not measured (never an invented 0)."""
    return rates[turn] if rates is not None and turn < len(rates) else None


def shown_rate(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.3f}"


def _pass_rows(result: DemoResult) -> list[list[str]]:
    before, after = result.before.report, result.after.report
    turns = max(before.turns, after.turns)
    verdicts = change_verdict_cells(result, turns)
    rows = []
    for turn in range(turns):
        b, a = rate_at(before.pass_at_1, turn), rate_at(after.pass_at_1, turn)
        pb, pa = rate_at(before.public_pass_at_1, turn), rate_at(after.public_pass_at_1, turn)
        change = "-" if a is None or b is None else _delta(b, a)
        rows.append(
            [
                f"turn {turn}",
                shown_rate(b),
                shown_rate(a),
                change,
                _change_interval(result, turn),
                verdicts[turn],
                shown_rate(pb),
                shown_rate(pa),
                _interval_at(before, turn),
                _interval_at(after, turn),
            ]
        )
    return rows


def _change_interval(result: DemoResult, turn: int) -> str:
    intervals = result.change_interval
    interval = intervals[turn] if turn < len(intervals) else None
    return "-" if interval is None else interval_text(interval, signed=True)


def change_verdicts(result: DemoResult) -> list[DifferenceVerdict | None]:
    """Per turn, what the change's paired interval says over the problems both runs
    evaluated (the before run's problems where the result does not say)."""
    counts = result.compared_problems
    return [
        difference_verdict(
            interval, counts[turn] if turn < len(counts) else result.before.report.problems
        )
        for turn, interval in enumerate(result.change_interval)
    ]


_CHANGE_VERDICT_TEXT = {
    DifferenceVerdict.BETTER: "up, beyond noise",
    DifferenceVerdict.WORSE: "down, beyond noise",
    DifferenceVerdict.WITHIN_NOISE: "within noise",
    DifferenceVerdict.TOO_FEW_PROBLEMS: "too few problems",
}


def change_verdict_cells(result: DemoResult, turns: int) -> list[str]:
    """A table's cells for `turns` rows: what the change's paired interval at each turn
    says, or '-' where the turn has none (so a reader of the table needs no sentence below
    it to read a row)."""
    said = change_verdicts(result)
    verdicts = [said[turn] if turn < len(said) else None for turn in range(turns)]
    return ["-" if v is None else _CHANGE_VERDICT_TEXT[v] for v in verdicts]


def noise_verdict(result: DemoResult) -> str:
    """One plain sentence: is the change from before to after larger than the noise?"""
    if not result.change_interval:
        return "The change could not be measured (no problem evaluated in both runs)."
    said = change_verdicts(result)
    beyond = [
        f"turn {turn} ({'up' if verdict == DifferenceVerdict.BETTER else 'down'})"
        for turn, verdict in enumerate(said)
        if verdict in (DifferenceVerdict.BETTER, DifferenceVerdict.WORSE)
    ]
    if beyond:
        return (
            "The change is larger than the noise at " + ", ".join(beyond) + ": its paired 95% "
            "interval excludes 0. On this handful of problems that is still weak evidence; "
            "`cobalt experiment` runs the real comparison (docs/experiments.md)."
        )
    if DifferenceVerdict.TOO_FEW_PROBLEMS in said:
        return (
            "Too few problems to call the change either way: the interval resamples "
            f"problems, and under {MIN_PROBLEMS_FOR_A_VERDICT} it shows their "
            "samples' noise, not how problems differ. This run shows the loop working; "
            "`--problems` sets how many (the default is sized to show a change)."
        )
    return (
        "The change is within the noise at every turn: each paired 95% interval of the "
        "difference contains 0, so this demo shows the loop working, not that training "
        "helped. `cobalt experiment` runs the real comparison, with held-out problems and "
        "the other training modes (docs/experiments.md)."
    )


def _interval_at(report: EvaluationReport, turn: int) -> str:
    """The 95% interval of Pass@1 at `turn` (docs/analysis.md), or '-'."""
    intervals = report.pass_at_1_interval or []
    interval = intervals[turn] if turn < len(intervals) else None
    return "-" if interval is None else interval_text(interval)


def _step_rows(result: DemoResult) -> list[list[str]]:
    rows = []
    for step in result.training.steps:
        cells = [str(step.step), str(step.policy_version)]
        for key, _ in STEP_COLUMNS:
            value = step.metrics.get(key)
            cells.append("–" if value is None else f"{value:.3g}")
        rows.append(cells)
    return rows


def _phase_line(result: DemoResult, phase: PhaseResult) -> str:
    runs = (
        _link(_ui(result, f"runs/{phase.sample_run}"), f"run {phase.sample_run}")
        + " (turn 0), "
        + _link(_ui(result, f"runs/{phase.refine_run}"), f"run {phase.refine_run}")
        + " (refined, evaluated)"
    )
    reused = " <span class='muted'>(reused from an earlier demo)</span>" if phase.reused else ""
    return f"<li><b>{phase.label}</b>, policy v{phase.policy_version}: {runs}{reused}</li>"


def trained_name(result: DemoResult) -> str:
    """The name the trained model is served under by `serve_command`."""
    return f"{result.served_model}-grpo-{result.training.id}"


def serve_command(result: DemoResult) -> str | None:
    """The command that serves the trained model (None: no policy directory was left)."""
    if result.trained_model is None:
        return None
    name = trained_name(result)
    return f"cobalt inference serve --model {result.trained_model} --served-name {name}"


def trained_summary(result: DemoResult) -> str:
    """One plain sentence: which model, how it was trained, on what, and where it is now."""
    job = result.training
    trainer = job.params.trainer
    where = (
        f"The trained weights (policy v{result.after.policy_version}, a Hugging Face model "
        f"directory) are in {result.trained_model}."
        if result.trained_model is not None
        else "The trainer left no policy directory (its checkpoints were removed)."
    )
    return (
        f"{result.model_dir.name} was trained with GRPO (the Cobalt reward, job {job.id}) for "
        f"{job.step} steps of {trainer.contexts_per_step} contexts x "
        f"{trainer.n_samples} samples, on {result.bandit_contexts} bandit "
        f"contexts cut from the baseline's run {_trained_on(result).refine_run}. {where}"
    )


def _trained_on(result: DemoResult) -> PhaseResult:
    """The base policy's run the contexts came from."""
    return result.trained_on or result.before


def compared_set(result: DemoResult) -> str:
    """What before and after were measured on, in a few words (a title)."""
    if not result.eval_dataset:
        return "HumanEval, the trained problems"
    return f"Generated, held-out instances ({result.eval_dataset})"


def problems_line(result: DemoResult) -> str:
    """What was trained on and what was compared, in words."""
    options = result.options
    if not result.eval_dataset:
        return f"{options.problems} HumanEval problems"
    return (
        f"{options.problems} generated training problems; before and after on "
        f"{options.eval_problems} held-out instances of the same templates"
    )


def _outcome_rows(result: DemoResult) -> list[list[str]]:
    from cobalt.demo.experiment.outcomes import OUTCOME_KINDS

    rows = []
    for label, seen in result.outcomes.items():
        answers = seen["answers"] or 1
        valid = seen["format_valid"]
        rows.append(
            [
                html.escape(label),
                str(seen["answers"]),
                "-" if valid is None else f"{valid:.2f}",
                *(f"{seen['outcomes'][kind] / answers:.2f}" for kind in OUTCOME_KINDS),
            ]
        )
    return rows


def _outcomes_section(result: DemoResult) -> list[str]:
    if not result.outcomes:
        return []
    from cobalt.demo.experiment.outcomes import OUTCOME_KINDS

    return [
        "<h2>What became of the first answers</h2>",
        "<p>Every turn-0 answer by its verdicts on the hidden tests, by kind (shares of the "
        "answers); <i>format-valid</i>: a program the rollouts judge, in one block tagged "
        "python. A gain that is only format shows here.</p>",
        _table(
            ["", "answers", "format-valid", *(k.replace("_", " ") for k in OUTCOME_KINDS)],
            _outcome_rows(result),
        ),
    ]


def bandit_summary(counts: dict[str, Any], contexts: int) -> str:
    """What the bandit builder kept, in words (its raw counts go in a folded table)."""
    parts = [f"{contexts} contexts"]
    if "turn_0_contexts" in counts or "partial_contexts" in counts:
        parts[0] += (
            f" ({counts.get('turn_0_contexts', 0)} from the problem alone, "
            f"{counts.get('partial_contexts', 0)} after 1-3 feedback turns)"
        )
    if "problems" in counts:
        parts.append(f"from {counts['problems']} problems")
    dropped = []
    if counts.get("problems_all_pass_at_turn_0"):
        dropped.append(
            f"{counts['problems_all_pass_at_turn_0']} problems every sample solved at turn 0"
        )
    if counts.get("dropped_over_token_cap"):
        dropped.append(f"{counts['dropped_over_token_cap']} contexts over the token cap")
    text = " ".join(parts)
    return text + (f"; left out: {', '.join(dropped)}" if dropped else "") + "."


def report_data(result: DemoResult) -> dict[str, Any]:
    """The figures of the report as plain JSON values."""
    return {
        "options": result.options.as_dict(),
        "model": str(result.model_dir),
        "before": {
            "sample_run": result.before.sample_run,
            "refine_run": result.before.refine_run,
            "policy_version": result.before.policy_version,
            "pass_at_1": result.before.report.pass_at_1,
            "public_pass_at_1": result.before.report.public_pass_at_1,
        },
        "after": {
            "sample_run": result.after.sample_run,
            "refine_run": result.after.refine_run,
            "policy_version": result.after.policy_version,
            "pass_at_1": result.after.report.pass_at_1,
            "public_pass_at_1": result.after.report.public_pass_at_1,
        },
        "evaluated_on": result.eval_dataset or result.dataset,
        "trained_on": {"dataset": result.dataset, "refine_run": _trained_on(result).refine_run},
        "change": result.change,
        "change_interval": result.change_interval,
        "compared_problems": result.compared_problems,
        "change_verdict": [None if v is None else v.value for v in change_verdicts(result)],
        "noise_verdict": noise_verdict(result),
        "outcomes": result.outcomes,
        "bandit": {"name": result.bandit_name, "contexts": result.bandit_contexts},
        "trained_model": None if result.trained_model is None else str(result.trained_model),
        "serve_command": serve_command(result),
        "training": {
            "job": result.training.id,
            "steps": [{"step": s.step, **s.metrics} for s in result.training.steps],
            "policy_version": result.training.policy_version,
        },
        "timings_s": result.timings,
    }


def _png(path: Path) -> str:
    encoded = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{encoded}">'


def _plot_training(result: DemoResult, path: Path) -> Path | None:
    """Mean reward and pass rate per step; None when there are no steps to draw."""
    steps = result.training.steps
    if not steps:
        return None
    import matplotlib

    matplotlib.use("Agg")  # files only; no display needed
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6.4, 3.6), dpi=120)
    xs = [s.step for s in steps]
    for key, label in (("reward_mean", "mean reward"), ("pass_rate", "pass rate")):
        axes.plot(xs, [s.metrics.get(key, float("nan")) for s in steps], marker="o", label=label)
    axes.set_xlabel("GRPO step")
    axes.set_xticks(xs)
    axes.grid(alpha=0.3)
    axes.legend()
    axes.set_title(f"training job {result.training.id}", fontsize=10)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
    return path


def _serving(result: DemoResult) -> list[str]:
    command = serve_command(result)
    if command is None:
        return []
    sample = (
        f"cobalt run sample --dataset {result.dataset or 'DATASET'} "
        f"--base-url http://127.0.0.1:8000/v1 --model {trained_name(result)} "
        f"--feedback-turns {result.options.turns}"
    )
    return [
        "<p>Serve it (vLLM, like the base model), then sample from it as from any endpoint:</p>",
        f"<pre><code>{html.escape(command)}\n{html.escape(sample)}</code></pre>",
    ]


def render_report(result: DemoResult, plots: Sequence[Path] = ()) -> str:
    """The report's HTML for `result`, with `plots` (PNG files) embedded."""
    options = result.options
    total = sum(result.timings.values())
    before_runs, after_runs = result.before.refine_run, result.after.refine_run
    counts = result.bandit_counts
    compare = _ui(result, f"runs/{result.after.refine_run}?compare={before_runs}")
    sections = [
        "<h1>Cobalt demo</h1>",
        f"<p class='muted'>{datetime.now(UTC):%Y-%m-%d %H:%M} UTC · model "
        f"<code>{html.escape(result.served_model)}</code> · {html.escape(problems_line(result))}"
        f" × {options.samples} samples, {options.turns} feedback turns, "
        f"{options.steps} GRPO steps · {total / 60:.1f} min</p>",
        "<h2>What was trained</h2>",
        f"<p>{html.escape(trained_summary(result))}</p>",
        *_serving(result),
        "<h2>Pass@1 per turn, before and after training</h2>",
        "<p>Hidden tests; turn 0 is the first program, each later turn a fix after the "
        "public tests' feedback. Pass@1 is per turn, not best-so-far (docs/method.md). "
        "<i>change [95%]</i> is the paired bootstrap interval of the change (over the same "
        f"problems; {html.escape(sampling_line(options.paired_sampling, options.seed))}) "
        "and <i>verdict</i> what it says (beyond noise where it excludes 0); "
        "the last two columns are each run's 95% interval.</p>",
        f"<p><b>{html.escape(noise_verdict(result))}</b></p>",
        _table(
            [
                "",
                "before",
                "after",
                "change",
                "change [95%]",
                "verdict",
                "public before",
                "public after",
                "before [95%]",
                "after [95%]",
            ],
            _pass_rows(result),
        ),
        *(_png(p) for p in plots),
        *_outcomes_section(result),
        "<h2>Runs</h2><ul>",
        *(
            [_phase_line(result, result.trained_on)]
            if result.trained_on not in (None, result.before)
            else []
        ),
        _phase_line(result, result.before),
        _phase_line(result, result.after),
        f"<li>{_link(compare, 'both refined runs on one chart')} in the web UI, and "
        f"{_link(_ui(result, f'compare/{before_runs}/{after_runs}'), 'problem by problem')}"
        ": which problems training fixed and which it broke, turn by turn</li></ul>",
        "<h2>Bandit contexts</h2>",
        f"<p>{html.escape(bandit_summary(counts, result.bandit_contexts))} "
        f"Built from run {_trained_on(result).refine_run}: "
        f"{_link(_ui(result, f'bandit/{result.bandit_name}'), result.bandit_name)}.</p>",
        "<details><summary>The builder's counts</summary>",
        _table(
            ["count", "value"],
            [[html.escape(k), html.escape(str(v))] for k, v in sorted(counts.items())],
        ),
        "</details>",
        "<h2>Training</h2>",
        f"<p>{_link(_ui(result, f'training/{result.training.id}'), f'job {result.training.id}')}"
        f": {result.training.step} steps; the inference server went from policy "
        f"v{result.before.policy_version} to v{result.after.policy_version} without a "
        f"restart. {_REWARD_FORMAT_NOTES[result.options.reward_format]}</p>",
        _table(["step", "policy", *(label for _, label in STEP_COLUMNS)], _step_rows(result)),
        "<h2>Where the time went</h2>",
        _table(
            ["stage", "seconds"], [[html.escape(k), f"{v:.1f}"] for k, v in result.timings.items()]
        ),
        "<h2>Looking further</h2>",
        "<p>The links above need the web UI running on the demo's store, the one every "
        "<code>cobalt</code> command opens (<code>COBALT_DATABASE_URL</code>, else "
        "<code>~/.local/share/cobalt/cobalt.db</code>); in the same environment:</p>",
        "<pre><code>cobalt orchestrator serve --port "
        f"{html.escape(result.ui_url.rsplit(':', 1)[-1])}\n"
        f"cobalt run list\ncobalt run show {result.after.refine_run}</code></pre>",
        "<p>(or <code>cobalt demo --keep-serving</code>).</p>",
        '<script type="application/json" id="demo-data">'
        + json.dumps(report_data(result)).replace("</", "<\\/")
        + "</script>",
    ]
    body = "\n".join(sections)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>Cobalt demo</title><style>{_STYLE}</style></head><body>{body}</body></html>"
    )


def write_report(result: DemoResult, path: Path) -> Path:
    """Write the report (and its PNGs beside it); returns the report's path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    plots = [
        plot_pass_at_1(
            [result.before.report, result.after.report],
            path.with_name("pass_at_1.png"),
            labels=[
                f"before (policy v{result.before.policy_version})",
                f"after (policy v{result.after.policy_version})",
            ],
        )
    ]
    training = _plot_training(result, path.with_name("training.png"))
    if training is not None:
        plots.append(training)
    path.write_text(render_report(result, plots), encoding="utf-8")
    return path
