"""An evaluation's report sent to experiment trackers (cobalt.shared.trackers).

Each `cobalt run evaluate --report-to ...` is one tracker run named after the Cobalt run:
its config is the run's (model, dataset, n, turns, sampling, template), and the metrics
are the `EvaluationReport`'s, under `eval/`:
- at step t, turn t's Pass@1 (hidden tests), public Pass@1, pass@k and mean reward, so a
  tracker's chart of `eval/pass_at_1` is Pass@1 per turn (the refinement curve);
- at the last turn's step, the summary: problems, samples, failed trajectories, Pass@1 at
  the first and last turn and the gain between them (W&B's run summary shows these).
The step axis is the turn, so judging progress (programs run so far) is not sent: it would
put a second meaning on the same axis; the terminal's progress bar shows it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from cobalt.shared.contracts.runs import EvaluationReport, RunPublic
from cobalt.shared.trackers import TrackedRun, TrackerSettings, open_reporters

__all__ = ["evaluation_run", "per_turn_metrics", "report_evaluation", "summary_metrics"]


def evaluation_run(run: RunPublic, *, at: datetime | None = None) -> TrackedRun:
    """A new tracker run for one evaluation of `run` (an evaluation is never resumed)."""
    stamp = (at or datetime.now(UTC)).strftime("%Y%m%d-%H%M%S")
    return TrackedRun(
        key=f"eval-run-{run.id}-{stamp}",
        name=f"eval run {run.id}: {run.model} on {run.dataset}",
        kind="evaluation",
        tags={"cobalt.run_id": str(run.id), "cobalt.dataset": run.dataset},
    )


def per_turn_metrics(report: EvaluationReport) -> list[dict[str, float]]:
    """Element t: what is logged at step t (turn t)."""
    turns: list[dict[str, float]] = []
    if report.pass_at_1 is None or report.public_pass_at_1 is None:
        return turns  # nothing measured: nothing logged, never a zero
    for turn in range(report.turns):
        values = {
            "eval/pass_at_1": report.pass_at_1[turn],
            "eval/public_pass_at_1": report.public_pass_at_1[turn],
        }
        for k, rates in report.pass_at_k.items():
            values[f"eval/pass_at_{k}"] = rates[turn]
        reward = report.mean_reward[turn] if report.mean_reward is not None else None
        if reward is not None:
            values["eval/mean_reward"] = reward
        turns.append(values)
    return turns


def summary_metrics(report: EvaluationReport) -> dict[str, float]:
    """The evaluation in a few numbers, logged at the last turn's step."""
    counts = {
        "eval/problems": float(report.problems),
        "eval/samples": float(report.samples),
        "eval/failed_trajectories": float(report.failed_trajectories),
    }
    if report.pass_at_1 is None:
        return counts
    first, last = report.pass_at_1[0], report.pass_at_1[-1]
    return {
        **counts,
        "eval/pass_at_1_first_turn": first,
        "eval/pass_at_1_last_turn": last,
        "eval/pass_at_1_gain": last - first,
    }


def report_evaluation(
    run: RunPublic,
    report: EvaluationReport,
    report_to: str | None,
    settings: TrackerSettings,
) -> tuple[str, ...]:
    """Send one evaluation to the trackers `report_to` names (None: COBALT_REPORT_TO);
    returns the trackers that took all of it.

    Raises:
        InvalidInput: an unknown tracker name.
        TrackerMissing: a named tracker is not installed.
    """
    chosen = settings.report_to if report_to is None else report_to
    with open_reporters(chosen, evaluation_run(run), settings) as reporters:
        reporters.log_config(
            {
                "run": {"id": run.id, "kind": str(run.kind), "parent_run_id": run.parent_run_id},
                "model": run.model,
                "dataset": run.dataset,
                "template": run.template_name,
                "params": run.params.model_dump(mode="json"),
            }
        )
        steps = per_turn_metrics(report)
        for turn, values in enumerate(steps):
            if turn == len(steps) - 1:
                values = {**values, **summary_metrics(report)}
            reporters.log_metrics(values, step=turn)
        return reporters.names
