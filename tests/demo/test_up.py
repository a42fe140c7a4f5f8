"""`cobalt up`'s plan (which services it starts, in what order, and how they find each
other) and its restart policy (an exited service is started again; a crash loop stops
`cobalt up`, naming the service)."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from cobalt.demo.errors import DemoFailed
from cobalt.demo.processes import ChildProcess
from cobalt.demo.up import RestartPolicy, UpPlan, _watch
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


def child(tmp_path: Path, name: str, program: str) -> ChildProcess:
    return ChildProcess(
        name=name, command=[sys.executable, "-c", program], log_path=tmp_path / f"{name}.log"
    )


FAST = RestartPolicy(allowed=2, window_s=60, first_delay_s=0.05, max_delay_s=0.1)


def test_a_service_that_exits_is_started_again_and_a_finished_trainer_is_not(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "crashed-once"
    # Exits 9 the first time (an OOM kill, a crash), runs the second.
    flaky = child(
        tmp_path,
        "worker 1",
        f"import os, sys, time\nif not os.path.exists({str(flag)!r}):\n"
        f"    open({str(flag)!r}, 'w').close(); sys.exit(9)\ntime.sleep(60)",
    )
    trainer = child(tmp_path, "trainer", "pass")
    said: list[str] = []
    stop = threading.Event()
    for started in (flaky, trainer):
        started.start()
    watching = threading.Thread(target=_watch, args=([flaky, trainer], said.append, FAST, stop))
    watching.start()
    try:
        deadline = time.monotonic() + 30
        while not (flag.exists() and flaky.is_running() and len(said) >= 3):
            assert time.monotonic() < deadline, said
            time.sleep(0.05)
    finally:
        stop.set()
        watching.join()
        flaky.stop()
    assert sorted(said) == sorted([
        f"the worker 1 exited with code 9; starting it again in 0.05 s (log {flaky.log_path})",
        "the worker 1 started again",
        "the trainer finished its job; the other services keep running",
    ])  # fmt: skip


def test_a_service_that_keeps_exiting_stops_up_naming_it(tmp_path: Path) -> None:
    broken = child(tmp_path, "executor", "import sys; print('port 8100 in use'); sys.exit(4)")
    broken.start()
    said: list[str] = []
    with pytest.raises(DemoFailed) as raised:
        _watch([broken], said.append, FAST)
    message = str(raised.value)
    assert "the executor exited with code 4 again, after 2 restarts" in message
    assert "port 8100 in use" in message  # the log's tail
    assert said.count("the executor started again") == 2
