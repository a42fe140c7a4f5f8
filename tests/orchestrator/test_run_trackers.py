"""`cobalt run evaluate --report-to ...`: an evaluation sent to TensorBoard, MLflow and
W&B (offline), read back with each tracker's reader; Pass@1 per turn and the summary equal
the report the command printed and the results stored in the database."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.runs.evaluation import stored_report
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runs import add_doubles, cobalt, json_out, run_sample
from tests.support.trackers import (
    as_float32,
    mlflow_metrics,
    mlflow_runs,
    offline_trackers,
    tensorboard_scalars,
    wandb_config,
    wandb_history,
    wandb_offline_runs,
    wandb_run_record,
)


@pytest.fixture
def store_url(sqlite_url: str) -> str:
    """One store is enough here: the trackers are what is tested."""
    return sqlite_url


def sampled_run(cli_env: dict[str, str], sessions: sessionmaker[Session], url: str) -> int:
    """Two problems x 3 samples x 3 turns: Pass@1 1/3, 1, 1 (tests/support/runs.py)."""
    dataset = add_doubles(sessions)
    sampled = run_sample(cli_env, dataset, url, "fake-model", "--n", "3", "--turns", "2", "--json")
    run_id: int = json_out(sampled)["run_id"]
    return run_id


def test_an_evaluation_reaches_every_tracker_as_stored(
    fake_model: tuple[FakeOpenAI, str],
    cli_env: dict[str, str],
    sessions: sessionmaker[Session],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run_id = sampled_run(cli_env, sessions, fake_model[1])
    env = {**cli_env, **offline_trackers(tmp_path)}
    for name, value in offline_trackers(tmp_path).items():  # for the readers here
        monkeypatch.setenv(name, value)
    evaluate = ["run", "evaluate", str(run_id), "--k", "2"]
    done = cobalt(env, *evaluate, "--report-to", "tensorboard,mlflow,wandb")
    assert done.returncode == 0, done.stderr
    assert "reported to tensorboard, mlflow, wandb" in done.stdout

    report = stored_report(sessions, run_id, ks=(2,))
    assert report.pass_at_1 == pytest.approx([1 / 3, 1.0, 1.0])
    expected = {
        "eval/pass_at_1": dict(enumerate(report.pass_at_1)),
        "eval/public_pass_at_1": dict(enumerate(report.public_pass_at_1)),
        "eval/pass_at_2": dict(enumerate(report.pass_at_k["2"])),
        "eval/problems": {2: 2.0},
        "eval/samples": {2: 3.0},
        "eval/failed_trajectories": {2: 0.0},
        "eval/pass_at_1_first_turn": {2: report.pass_at_1[0]},
        "eval/pass_at_1_last_turn": {2: report.pass_at_1[2]},
        "eval/pass_at_1_gain": {2: report.pass_at_1[2] - report.pass_at_1[0]},
    }

    [folder] = (tmp_path / "tensorboard").iterdir()
    assert folder.name.startswith(f"eval-run-{run_id}-")
    assert tensorboard_scalars(folder) == as_float32(expected)

    uri = offline_trackers(tmp_path)["MLFLOW_TRACKING_URI"]
    [run] = mlflow_runs(uri, "cobalt-tests")
    assert mlflow_metrics(uri, run.info.run_id) == expected
    assert run.data.tags["cobalt.kind"] == "evaluation"
    assert run.data.tags["cobalt.run_id"] == str(run_id)
    assert run.data.params["model"] == "fake-model" and run.data.params["params.turns"] == "2"

    [log] = wandb_offline_runs(tmp_path)
    assert wandb_history(log) == expected
    assert wandb_config(log)["run"]["id"] == run_id
    assert wandb_run_record(log).job_type == "evaluation"


def test_report_to_is_checked_before_anything_runs(cli_env: dict[str, str]) -> None:
    done = cobalt(cli_env, "run", "evaluate", "1", "--report-to", "comet")
    assert done.returncode == 2
    assert "--report-to (COBALT_REPORT_TO): comet is not a tracker" in done.stderr
    from_env = cobalt({**cli_env, "COBALT_REPORT_TO": "neptune"}, "run", "evaluate", "1")
    assert from_env.returncode == 2 and "neptune is not a tracker" in from_env.stderr
