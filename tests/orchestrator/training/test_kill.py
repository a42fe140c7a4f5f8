"""kill -9 of the trainer and of a rollout worker in the middle of a run, then resume: the
ledger ends with exactly the groups an uninterrupted run consumed, step by step, each
consumed once, and the trainer with the same weights (a LoRA job: the same adapter). The
resume state is written every 3 steps and the kill lands after step 4, so the resume
replays from step 3's state. With `filter_zero_variance` on, every even round starts at a
context the model solves every time (no variance): it is dropped and refilled by a
rollout worker, and the replay still trains on the same groups.
Real processes: the API (PostgreSQL, Redis), `cobalt worker` processes, the trainer in
.venv-trainer; the deterministic test model stands in for vLLM."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis import Redis
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.models import TrainingGroup
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.runs import REDIS_URL, worker
from tests.support.serving import serve_asgi
from tests.support.training import TRAINER_PYTHON, answer, bandit_dataset, flat_after_feedback

pytestmark = pytest.mark.slow

STEPS = 5
SAVE_EVERY = 3


@pytest.fixture
def slow_model(filtered: bool) -> Iterator[str]:
    """The scripted model, slow enough (0.3 s a request) for a kill to land mid-step."""
    responder = flat_after_feedback if filtered else answer
    with serve_fake_openai(FakeOpenAI(responder=responder, delay_s=0.3)) as url:
        yield url


def trainer(env: dict[str, str], job_id: int, log: Path) -> subprocess.Popen[str]:
    """The trainer process, its output appended to `log`: a pipe nobody reads while the
    test polls would fill (a line per poll) and block the trainer mid-step."""
    with log.open("a") as out:
        return subprocess.Popen(
            [str(TRAINER_PYTHON), "-m", "cobalt.trainer", "serve", "--job", str(job_id),
             "--until-step", str(STEPS)],
            env=env, stdout=out, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


def kill_9(process: subprocess.Popen[str]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)


def wait_for_step(api: httpx.Client, job_id: int, step: int, process: Any, log: Path) -> None:
    deadline = time.monotonic() + 300
    while api.get(f"/v1/training/jobs/{job_id}").json()["step"] < step:
        assert process.poll() is None, tail(log)
        assert time.monotonic() < deadline
        time.sleep(0.1)


def consumed(sessions: sessionmaker[Session], job_id: int) -> list[tuple[int, str, int]]:
    """(step, context, round) of every group the job trained on, in step order."""
    with sessions() as session:
        rows = session.execute(
            select(TrainingGroup.step, TrainingGroup.context_key, TrainingGroup.round)
            .where(TrainingGroup.job_id == job_id, TrainingGroup.status == "consumed")
            .order_by(TrainingGroup.step, TrainingGroup.id)
        ).all()
    return [(int(step), key, int(round)) for step, key, round in rows]


def dropped(sessions: sessionmaker[Session], job_id: int) -> list[tuple[int, str, int, str]]:
    """(step, context, round, reason) of every group the job dropped."""
    with sessions() as session:
        rows = session.execute(
            select(TrainingGroup.step, TrainingGroup.context_key, TrainingGroup.round,
                   TrainingGroup.drop_reason)
            .where(TrainingGroup.job_id == job_id, TrainingGroup.status == "dropped")
            .order_by(TrainingGroup.step, TrainingGroup.id)
        ).all()  # fmt: skip
    return [(int(step), key, int(round), str(reason)) for step, key, round, reason in rows]


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize(
    ("lora_rank", "filtered"),
    [(None, False), (4, False), (None, True)],
    ids=["full-weights", "lora", "filter-refill"],
)
def test_kill_9_and_resume_consume_what_an_uninterrupted_run_does(
    lora_rank: int | None,
    filtered: bool,
    tiny_model: Path,
    store_url: str,
    executor_url: str,
    sessions: sessionmaker[Session],
    slow_model: str,
    tmp_path: Path,
) -> None:
    bandit_dataset(sessions)
    redis = Redis.from_url(REDIS_URL)
    redis.flushdb()
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    services = {
        **base_env,
        "COBALT_DATABASE_URL": store_url,
        "COBALT_EXECUTOR_URL": executor_url,
        "COBALT_REDIS_URL": REDIS_URL,
        "COBALT_RUN_RECOVERY_INTERVAL_S": "1",  # the killed worker's group is queued again
    }
    settings = OrchestratorSettings(database_url=store_url, redis_url=REDIS_URL)
    logs = tmp_path / "logs"
    logs.mkdir()
    workers = [
        worker(services, log=logs / "worker-0.log"),
        worker(services, log=logs / "worker-1.log"),
    ]
    try:
        with serve_asgi(create_app(settings)) as url, httpx.Client(base_url=url) as api:
            params: dict[str, Any] = {
                "base_url": slow_model, "served_model": "fake-model",
                "trainer": {"n_samples": 3, "contexts_per_step": 1, "updates_per_step": 1,
                            "lr": 1e-3},
            }  # fmt: skip
            if lora_rank is not None:  # the adapter trains, and resumes, instead
                params["trainer"] |= {"lora_rank": lora_rank, "lr": 1e-2}
            if filtered:
                params |= {"filter_zero_variance": True, "max_refill_rounds": 1}
            jobs = [
                api.post(
                    "/v1/training/jobs",
                    json={"name": name, "contexts": "ctx", "model": str(tiny_model),
                          "params": params},
                ).json()["id"]
                for name in ("straight", "killed")
            ]  # fmt: skip
            env = {
                **base_env,
                "COBALT_TRAINER_ORCHESTRATOR_URL": url,
                "COBALT_TRAINER_INFERENCE_URL": "",
                "COBALT_TRAINER_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
                "COBALT_TRAINER_POLL_INTERVAL_S": "0.05",
                "COBALT_TRAINER_SAVE_EVERY": str(SAVE_EVERY),
            }
            straight = trainer(env, jobs[0], logs / "trainer-straight.log")
            straight.wait(timeout=600)
            assert straight.returncode == 0, tail(logs / "trainer-straight.log")

            killed = trainer(env, jobs[1], logs / "trainer-killed.log")
            wait_for_step(api, jobs[1], 4, killed, logs / "trainer-killed.log")
            kill_9(killed)  # in step 5, after step 3's resume state: claiming, training, saving
            killed_at = latest_checkpoint_step(tmp_path / "checkpoints", jobs[1])
            kill_9(workers[0])  # and a worker, perhaps in the middle of a rollout
            workers[0] = worker(services, log=logs / "worker-0.log")
            resumed = trainer(env, jobs[1], logs / "trainer-resumed.log")
            resumed.wait(timeout=600)
            assert resumed.returncode == 0, tail(logs / "trainer-resumed.log")
            shown = [api.get(f"/v1/training/jobs/{job}").json() for job in jobs]
    finally:
        for process in workers:
            if process.poll() is None:
                kill_9(process)
        redis.flushdb()
        redis.close()

    assert [job["step"] for job in shown] == [STEPS, STEPS]
    assert [[s["step"] for s in job["steps"]] for job in shown] == [[1, 2, 3, 4, 5]] * 2
    assert [[s["policy_version"] for s in job["steps"]] for job in shown] == [[1, 2, 3, 4, 5]] * 2
    straight_run, killed_run = consumed(sessions, jobs[0]), consumed(sessions, jobs[1])
    assert [step for step, _, _ in straight_run] == [1, 2, 3, 4, 5]  # one group a step
    assert killed_run == straight_run
    assert dropped(sessions, jobs[1]) == dropped(sessions, jobs[0])
    if filtered:  # rounds 2 and 4 start at the flat context, dropped then refilled
        flat = [(step, round) for step, _, round, _ in dropped(sessions, jobs[0])]
        assert flat == [(2, 2), (4, 4)]
        assert {key for _, key, _ in straight_run} == {"bandit:1"}
        metrics = [s["metrics"] for s in shown[1]["steps"]]
        assert [m["dropped_zero_variance"] for m in metrics] == [0, 1, 0, 1, 0]
        assert [m["refill_rounds"] for m in metrics] == [0, 1, 0, 1, 0]
        assert [m["informative_groups"] for m in metrics] == [1] * STEPS
    assert killed_at in (3, 5)  # 5 only if the kill came after the last resume state
    final = [tmp_path / "checkpoints" / f"job-{job}" / f"step-{STEPS}" for job in jobs]
    assert [latest_checkpoint_step(tmp_path / "checkpoints", job) for job in jobs] == [STEPS] * 2
    name = "model.safetensors" if lora_rank is None else "adapter_model.safetensors"
    weights = [(path / "policy" / name).read_bytes() for path in final]
    assert weights[0] == weights[1]  # the same float32 tensors, byte for byte


def latest_checkpoint_step(root: Path, job_id: int) -> int | None:
    """The newest step with a complete resume state (read as cobalt.trainer.checkpoint
    does; this environment has no torch)."""
    steps = [
        int(path.parent.name.removeprefix("step-"))
        for path in (root / f"job-{job_id}").glob("step-*/trainer-state.pt")
    ]
    return max(steps, default=None)
