"""The trainer's reports to experiment trackers (cobalt.shared.trackers): the job's
config once, then every reported step's metrics under `train/`.

Which trackers: the job's `report_to` (`cobalt train start --report-to`), else this
process's COBALT_REPORT_TO. The values sent are the step's reported metrics
(`loop.step_metrics`, what `cobalt train show` and Prometheus show) plus the policy
version and the learning rate, at the step's number; rank 0 alone reports. A tracker
that fails is warned about once and left out: training goes on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cobalt.shared.contracts.training import TrainingJobPublic
from cobalt.shared.trackers import Reporters, TrackedRun, TrackerSettings, open_reporters
from cobalt.trainer.settings import TrainerSettings, job_hyperparameters

__all__ = ["JobTracking", "job_run", "step_values"]


def job_run(job: TrainingJobPublic) -> TrackedRun:
    """The tracker run of a job: the same one whenever its trainer (re)starts."""
    return TrackedRun(
        key=f"train-job-{job.id}-{job.created_at:%Y%m%d-%H%M%S}",
        name=f"train job {job.id}: {job.name}",
        kind="train",
        resume=True,
        tags={"cobalt.job": str(job.id), "cobalt.mode": job.mode},
    )


def step_values(
    metrics: Mapping[str, float], *, policy_version: int, lr: float
) -> dict[str, float]:
    """What one step sends: every reported metric, the policy version and the (constant)
    learning rate, each under `train/`."""
    values = {f"train/{name}": float(value) for name, value in metrics.items()}
    values["train/policy_version"] = float(policy_version)
    values["train/lr"] = lr
    return values


class JobTracking:
    """The `on_step` of a `TrainerRun` that sends each step to the job's trackers."""

    def __init__(self, reporters: Reporters, *, lr: float) -> None:
        self.reporters = reporters
        self.lr = lr

    @classmethod
    def open(
        cls,
        job: TrainingJobPublic,
        settings: TrainerSettings,
        trackers: TrackerSettings | None = None,
    ) -> JobTracking:
        """Open the job's trackers and send its config (raises `TrackerMissing` before
        any model loads when a named tracker is not installed)."""
        trackers = trackers or TrackerSettings()
        params = job.params
        hyper = job_hyperparameters(params.trainer.model_dump(), settings)
        # None: the job leaves it to the trainer.
        report_to = trackers.report_to if params.report_to is None else params.report_to
        reporters = open_reporters(report_to, job_run(job), trackers)
        config: dict[str, Any] = {
            "job": {"id": job.id, "name": job.name, "mode": job.mode},
            "model": job.model,
            "contexts": job.contexts,
            "rollouts": params.model_dump(mode="json", exclude={"mode", "trainer", "report_to"}),
            "trainer": hyper.model_dump(mode="json"),
        }
        reporters.log_config(config)
        return cls(reporters, lr=hyper.lr)

    def record(self, step: int, policy_version: int, metrics: dict[str, float]) -> None:
        self.reporters.log_metrics(
            step_values(metrics, policy_version=policy_version, lr=self.lr), step
        )

    def close(self) -> None:
        self.reporters.close()
