"""cobalt.shared.trackers: `report_to` names, each tracker's files read back with its own
reader (offline), and the failure policy (a failing tracker is warned about once and left
out; the others and the caller go on)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cobalt.shared.errors import InvalidInput
from cobalt.shared.trackers import (
    TRACKERS,
    Reporters,
    TrackedRun,
    TrackerMissing,
    TrackerSettings,
    check_installed,
    flatten_config,
    open_reporters,
    parse_report_to,
)
from tests.support.trackers import (
    as_float32,
    mlflow_metrics,
    mlflow_runs,
    offline_trackers,
    tensorboard_scalars,
    tensorboard_text,
    unreachable_mlflow,
    wandb_config,
    wandb_history,
    wandb_offline_runs,
    wandb_run_record,
)

RUN = TrackedRun(key="train-job-7-x", name="train job 7", kind="train", resume=True)
STEPS = {1: {"train/reward_mean": 0.125, "train/kl_ref": 3.0e-4}, 2: {"train/reward_mean": 0.5}}
CONFIG = {"model": "/models/tiny", "trainer": {"lr": 1e-6, "n_samples": 4}}


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, value in offline_trackers(tmp_path).items():
        monkeypatch.setenv(name, value)
    return tmp_path


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, ()),
        ("none", ()),
        ("", ()),
        ("all", TRACKERS),
        ("wandb, TensorBoard", ("tensorboard", "wandb")),
        (["mlflow", "mlflow"], ("mlflow",)),
    ],
)
def test_report_to_names_trackers(value: Any, expected: tuple[str, ...]) -> None:
    assert parse_report_to(value) == expected


@pytest.mark.parametrize("value", ["tensorbord", "none,wandb"])
def test_a_wrong_report_to_names_the_choices(value: str) -> None:
    with pytest.raises(InvalidInput, match="tensorboard, mlflow, wandb"):
        parse_report_to(value)


def test_a_wrong_cobalt_report_to_is_refused_by_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COBALT_REPORT_TO", "comet")
    with pytest.raises(ValueError, match="comet is not a tracker"):
        TrackerSettings()


def test_a_missing_tracker_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    check_installed(["tensorboard", "mlflow"])
    with pytest.raises(TrackerMissing, match=r"cobalt-shared\[wandb\]"):
        check_installed(["tensorboard", "wandb"])


def test_config_is_flattened_to_dotted_strings() -> None:
    assert flatten_config(CONFIG) == {
        "model": "/models/tiny", "trainer.lr": "1e-06", "trainer.n_samples": "4",
    }  # fmt: skip


def report(reporters: Reporters) -> None:
    reporters.log_config(CONFIG)
    for step, metrics in STEPS.items():
        reporters.log_metrics(metrics, step)
    reporters.close()


def expected_by_metric() -> dict[str, dict[int, float]]:
    by_metric: dict[str, dict[int, float]] = {}
    for step, metrics in STEPS.items():
        for name, value in metrics.items():
            by_metric.setdefault(name, {})[step] = value
    return by_metric


def test_every_tracker_stores_the_metrics_and_config(offline: Path) -> None:
    reporters = open_reporters("all", RUN, TrackerSettings())
    assert reporters.names == TRACKERS
    report(reporters)
    assert reporters.failed == {}
    expected = expected_by_metric()

    scalars = tensorboard_scalars(offline / "tensorboard" / RUN.key)
    assert scalars == as_float32(expected)
    assert "| trainer.lr | 1e-06 |" in tensorboard_text(offline / "tensorboard" / RUN.key, "config")

    [run] = mlflow_runs(offline_trackers(offline)["MLFLOW_TRACKING_URI"], "cobalt-tests")
    assert run.data.tags["cobalt.run"] == RUN.key and run.info.run_name == RUN.name
    assert run.data.params == flatten_config(CONFIG)
    assert run.info.status == "FINISHED"
    assert mlflow_metrics(offline_trackers(offline)["MLFLOW_TRACKING_URI"], run.info.run_id) == (
        expected
    )

    [log] = wandb_offline_runs(offline)
    assert wandb_history(log) == expected
    assert wandb_config(log) == CONFIG
    record = wandb_run_record(log)
    assert (record.run_id, record.display_name, record.project) == (
        RUN.key, RUN.name, "cobalt-tests",
    )  # fmt: skip


def test_a_resumed_mlflow_run_goes_on_in_the_same_run(offline: Path) -> None:
    """A restarted trainer's steps land in the run its first process opened."""
    uri = offline_trackers(offline)["MLFLOW_TRACKING_URI"]
    for step in (1, 2):
        with open_reporters("mlflow", RUN, TrackerSettings()) as reporters:
            # a restart may differ in a setting of its machine: the first value stays
            reporters.log_config({"trainer": {"micro_batch_tokens": 1000 * step}, "step": step})
            reporters.log_metrics({"train/reward_mean": step / 4}, step)
        assert reporters.failed == {}
    [run] = mlflow_runs(uri, "cobalt-tests")
    assert mlflow_metrics(uri, run.info.run_id) == {"train/reward_mean": {1: 0.25, 2: 0.5}}
    assert run.data.params == {"trainer.micro_batch_tokens": "1000", "step": "1"}


class Broken:
    """A tracker whose every call fails, counting the calls it got."""

    def __init__(self) -> None:
        self.calls = 0

    def log_config(self, config: Mapping[str, Any]) -> None:
        self.calls += 1
        raise ConnectionError("server gone")

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.calls += 1
        raise ConnectionError("server gone")

    def close(self) -> None:
        self.calls += 1
        raise ConnectionError("server gone")


class Kept:
    def __init__(self) -> None:
        self.steps: list[int] = []
        self.closed = False

    def log_config(self, config: Mapping[str, Any]) -> None:
        pass

    def log_metrics(self, metrics: Mapping[str, float], step: int) -> None:
        self.steps.append(step)

    def close(self) -> None:
        self.closed = True


def test_a_failing_tracker_is_warned_about_once_and_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    broken, kept = Broken(), Kept()
    reporters = Reporters({"mlflow": broken, "tensorboard": kept})
    with caplog.at_level(logging.WARNING, logger="cobalt.shared.trackers"):
        report(reporters)
    assert broken.calls == 1  # never called again after its failure
    assert kept.steps == [1, 2] and kept.closed
    assert reporters.failed == {"mlflow": "ConnectionError: server gone"}
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        "tracker mlflow failed (ConnectionError: server gone); going on without it for the "
        "rest of this run"
    ]


def test_an_unreachable_mlflow_server_leaves_the_other_trackers_working(
    offline: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name, value in unreachable_mlflow().items():
        monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING, logger="cobalt.shared.trackers"):
        reporters = open_reporters("tensorboard,mlflow", RUN, TrackerSettings())
        report(reporters)
    assert reporters.names == () and list(reporters.failed) == ["mlflow"]
    assert len(caplog.records) == 1 and "tracker mlflow failed" in caplog.records[0].getMessage()
    scalars = tensorboard_scalars(offline / "tensorboard" / RUN.key)
    assert scalars == as_float32(expected_by_metric())


# MLflow 3.17's SQL store still asks SQLAlchemy 2.1 for a deprecated loader (a warning).
@pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy is deprecated")
def test_mlflow_without_a_tracking_uri_uses_its_default_sqlite_store(
    offline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MLflow 3's default (sqlite:///mlflow.db in the working directory) works as installed
    by the `mlflow` extra (mlflow-skinny with SQLAlchemy and Alembic)."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    monkeypatch.chdir(offline)
    with open_reporters("mlflow", RUN, TrackerSettings()) as reporters:
        reporters.log_metrics(STEPS[2], 2)
    assert reporters.failed == {}
    uri = f"sqlite:///{offline / 'mlflow.db'}"
    [run] = mlflow_runs(uri, "cobalt-tests")
    assert mlflow_metrics(uri, run.info.run_id) == {"train/reward_mean": {2: 0.5}}
