"""The trainer's reports to TensorBoard, MLflow and W&B (offline), read back with each
tracker's own reader: every step's values equal what the trainer reported to the
orchestrator (the stored metrics `cobalt train show` prints), with the policy version, the
learning rate and the job's config; a tracker that fails leaves training going."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from cobalt.shared.trackers import TrackerSettings
from cobalt.trainer.loop import TrainerRun
from cobalt.trainer.tracking import JobTracking, job_run
from tests.support.trackers import (
    as_float32,
    mlflow_metrics,
    mlflow_runs,
    offline_trackers,
    tensorboard_scalars,
    unreachable_mlflow,
    wandb_config,
    wandb_history,
    wandb_offline_runs,
)
from tests.trainer import test_loop
from tests.trainer.test_loop import FakeOrchestrator, trainer

STEPS = 2
model_dir = test_loop.model_dir  # the tiny model saved as the job's (a fixture)


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in offline_trackers(tmp_path).items():
        monkeypatch.setenv(name, value)
    return tmp_path


def train_with_trackers(fake: FakeOrchestrator, checkpoints: Path) -> JobTracking:
    run = trainer(fake, checkpoints)
    tracking = JobTracking.open(fake.job(), run.settings, TrackerSettings())
    tracked = TrainerRun(
        run.settings, run.job_id, run.orchestrator, run.inference, on_step=tracking.record
    )
    try:
        assert tracked.run(max_steps=STEPS) == STEPS
    finally:
        tracking.close()
    return tracking


def stored_by_metric(fake: FakeOrchestrator) -> dict[str, dict[int, float]]:
    """The reported steps as the trackers should hold them."""
    expected: dict[str, dict[int, float]] = {}
    for report in fake.reports:
        values = {
            **{f"train/{k}": v for k, v in report.metrics.items()},
            "train/policy_version": float(report.policy_version),
            "train/lr": fake.params["trainer"]["lr"],
        }
        for name, value in values.items():
            expected.setdefault(name, {})[report.step] = value
    return expected


def test_every_step_reaches_every_tracker_as_reported(
    model_dir: Path, tmp_path: Path, offline: Path
) -> None:
    fake = FakeOrchestrator(model_dir)
    fake.params["report_to"] = ["tensorboard", "mlflow", "wandb"]
    tracking = train_with_trackers(fake, tmp_path / "ckpt")
    assert tracking.reporters.failed == {}
    expected = stored_by_metric(fake)
    for name in ("reward_mean", "pass_rate", "ppo_kl", "kl_ref", "pg_clipfrac", "entropy",
                 "train_seconds", "generate_seconds", "policy_version", "lr"):  # fmt: skip
        assert f"train/{name}" in expected, name
    assert expected["train/policy_version"] == {1: 1.0, 2: 2.0}

    key = job_run(fake.job()).key
    assert tensorboard_scalars(offline / "tensorboard" / key) == as_float32(expected)

    uri = offline_trackers(offline)["MLFLOW_TRACKING_URI"]
    [run] = mlflow_runs(uri, "cobalt-tests")
    assert mlflow_metrics(uri, run.info.run_id) == expected
    assert run.data.params["trainer.lr"] == "0.001"
    assert run.data.params["rollouts.max_staleness"] == "0"
    assert run.data.tags["cobalt.job"] == "4"

    [log] = wandb_offline_runs(offline)
    assert wandb_history(log) == expected
    config = wandb_config(log)
    assert config["trainer"]["n_samples"] == 4 and config["model"] == str(model_dir)


def test_the_trainers_cobalt_report_to_applies_when_the_job_names_none(
    model_dir: Path, tmp_path: Path, offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeOrchestrator(model_dir)
    fake.params["report_to"] = None  # `cobalt train start` without --report-to
    monkeypatch.setenv("COBALT_REPORT_TO", "tensorboard")
    tracking = train_with_trackers(fake, tmp_path / "ckpt")
    assert tracking.reporters.failed == {}
    assert not (offline / "mlruns").exists() and not wandb_offline_runs(offline)
    scalars = tensorboard_scalars(offline / "tensorboard" / job_run(fake.job()).key)
    assert scalars == as_float32(stored_by_metric(fake))


def test_an_unreachable_mlflow_server_does_not_stop_training(
    model_dir: Path,
    tmp_path: Path,
    offline: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name, value in unreachable_mlflow().items():
        monkeypatch.setenv(name, value)
    fake = FakeOrchestrator(model_dir)
    fake.params["report_to"] = ["tensorboard", "mlflow"]
    with caplog.at_level(logging.WARNING, logger="cobalt.shared.trackers"):
        tracking = train_with_trackers(fake, tmp_path / "ckpt")
    assert [r.step for r in fake.reports] == [1, 2]  # trained and reported all the same
    assert list(tracking.reporters.failed) == ["mlflow"]
    assert sum("tracker mlflow failed" in r.getMessage() for r in caplog.records) == 1
    scalars = tensorboard_scalars(offline / "tensorboard" / job_run(fake.job()).key)
    assert scalars == as_float32(stored_by_metric(fake))
