"""`cobalt up`'s plan: which services it starts, in what order, and how they find each other."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cobalt.demo.up import UpPlan
from cobalt.shared.ports import free_port


@pytest.fixture
def ports(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    chosen = {"executor": free_port(), "orchestrator": free_port(), "inference": free_port()}
    for name in list(os.environ):
        if name.startswith("COBALT_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("COBALT_EXECUTOR_PORT", str(chosen["executor"]))
    monkeypatch.setenv("COBALT_ORCHESTRATOR_PORT", str(chosen["orchestrator"]))
    monkeypatch.setenv("COBALT_INFERENCE_PORT", str(chosen["inference"]))
    return chosen


def test_with_redis_the_plan_has_workers_and_a_trainer_wired_to_the_services(
    ports: dict[str, int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("COBALT_REDIS_URL", "redis://127.0.0.1:6379/15")

    plan = UpPlan.from_environment(workers=2, train_job=7, inference=True, log_dir=tmp_path)

    names = [child.name for child in plan.children]
    assert names == [
        "executor", "orchestrator API", "inference server (vLLM)", "worker 1", "worker 2",
        "trainer",
    ]  # fmt: skip
    trainer = plan.children[-1]
    assert trainer.command[-2:] == ["--job", "7"]
    assert (
        trainer.env["COBALT_TRAINER_ORCHESTRATOR_URL"]
        == f"http://127.0.0.1:{ports['orchestrator']}"
    )
    assert trainer.env["COBALT_TRAINER_INFERENCE_URL"] == f"http://127.0.0.1:{ports['inference']}"
    assert all(
        c.env["COBALT_EXECUTOR_URL"] == f"http://127.0.0.1:{ports['executor']}"
        for c in plan.children
    )
    assert "rollouts: 2 RQ workers on Redis" in plan.notes


def test_without_redis_rollouts_run_in_the_orchestrator_and_workers_are_refused(
    ports: dict[str, int], tmp_path: Path
) -> None:
    plan = UpPlan.from_environment(workers=0, train_job=None, inference=False, log_dir=tmp_path)

    assert [c.name for c in plan.children] == ["executor", "orchestrator API"]
    assert any("threads of the orchestrator" in note for note in plan.notes)
    with pytest.raises(ValueError, match="--workers needs COBALT_REDIS_URL"):
        UpPlan.from_environment(workers=1, train_job=None, inference=False, log_dir=tmp_path)


def test_a_bad_setting_is_named(
    ports: dict[str, int], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("COBALT_ORCHESTRATOR_PORT", "not-a-port")

    with pytest.raises(ValueError, match="bad COBALT_\\* setting orchestrator_port"):
        UpPlan.from_environment(workers=0, train_job=None, inference=False, log_dir=tmp_path)
