"""One training job driven through a sequence of faults, one kind after another (or, with
COBALT_CHAOS_FAULTS=N and COBALT_CHAOS_SEED=S, N faults drawn from seed S), and its end
state checked: every step trained, each on groups the ledger holds exactly once, every
trained sample sampled by the policy version its group is stamped with, no duplicate turn,
and every process the test started gone. docs/deploy.md ("When a part fails mid-job")
says what each fault does to a deployment.

Real processes and servers of the test's own (tests/support/chaos.py's `chaos_deployment`,
shared with test_evaluation_chaos.py, plus the trainer): `cobalt orchestrator serve`,
`cobalt worker` processes, the trainer in .venv-trainer (each killed with -9 and
restarted), a private redis-server (restarted with its data and empty), a TCP proxy in
front of the session's PostgreSQL database (connections dropped mid-transaction, then
refused), HTTP proxies in front of the executor and the model (503 and 429 for a while),
and the trainer's checkpoint volume on a tmpfs of the test's own (filled up, remounted
read-only). The deterministic test model stands in for vLLM, with the inference
service's control path: the trainer publishes each version to it, and it writes the
version it serves into every response (the inference-kill case needs the real server:
test_inference_chaos.py). Each process's output goes to a file under the test's tmp_path
(logs/), shown when the trainer fails."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import warnings
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store.models import Turn
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.chaos import (
    SHARED_KINDS,
    FaultLog,
    chaos_deployment,
    fault_sequence,
    kill_9,
    wait_until,
)
from tests.support.training import TRAINER_PYTHON, answer, bandit_dataset, consumed_groups
from tests.support.volumes import can_mount, small_volume

pytestmark = pytest.mark.slow

CHECKPOINT_KINDS = ["checkpoint-full", "checkpoint-read-only"]
"""On a tmpfs of the test's own (tests/support/volumes.py), where it can mount one."""
KINDS = [*SHARED_KINDS[:9], "trainer-kill", *SHARED_KINDS[9:], *CHECKPOINT_KINDS]
"""The shared kinds (tests/support/chaos.py), with the trainer killed among them, and the
trainer's checkpoint volume full and read-only."""
FAULTS = int(os.environ.get("COBALT_CHAOS_FAULTS", "0"))
SEED = int(os.environ["COBALT_CHAOS_SEED"]) if "COBALT_CHAOS_SEED" in os.environ else None
EXECUTOR_TIMEOUT_S = 6
"""The workers' executor client timeout (COBALT_EXECUTOR_CLIENT_TIMEOUT_S; 300 s by
default): a judgement takes well under a second here, and executor-stall stops the
executor for 2 s longer than this."""
PROGRESS_TIMEOUT_S = 240
"""Longest wait for the next step after a fault (round retry 5 s + a step on 2 busy cores)."""
CHECKPOINT_OUTAGE_S = 8
"""The trainer's COBALT_TRAINER_CHECKPOINT_OUTAGE_S: checkpoint-read-only is fixed within
it (the trainer goes on), checkpoint-full outlasts it (the trainer exits 1, is started
again once the volume has room, and resumes)."""
VOLUME_BYTES = 256 * 1024 * 1024


def test_a_training_job_survives_each_fault_kind(
    database: str, store: sessionmaker[Session], tiny_model: Path, tmp_path: Path
) -> None:
    cannot_mount = can_mount(tmp_path)
    kinds = KINDS
    if cannot_mount is not None:
        warnings.warn(f"checkpoint volume faults left out: {cannot_mount}", stacklevel=1)
        kinds = [kind for kind in KINDS if kind not in CHECKPOINT_KINDS]
    faults = fault_sequence(kinds, FAULTS, SEED)
    steps = len(faults) + 1
    checkpoints = tmp_path / "checkpoints"
    bandit_dataset(store)
    log = FaultLog()
    trainers: list[subprocess.Popen[str]] = []
    # The model serves the version the trainer last published to it (as Cobalt's inference
    # service does) and writes it into each response, so every stored sample says which
    # policy sampled it.
    fake = FakeOpenAI(responder=answer, delay_s=0.1, policy_version=0, mark_version=True)
    with (
        contextlib.ExitStack() as mounted,
        serve_fake_openai(fake) as model_url,
        chaos_deployment(
            database,
            model_url,
            tmp_path,
            executor_timeout_s=EXECUTOR_TIMEOUT_S,
            settings={"COBALT_RUN_RECOVERY_INTERVAL_S": "1"},  # lost group jobs queued again
        ) as deployment,
    ):
        volume = None
        if cannot_mount is None:
            volume = mounted.enter_context(small_volume(checkpoints, VOLUME_BYTES))
        logs = deployment.logs
        try:
            with httpx.Client(base_url=deployment.url) as api:
                params: dict[str, Any] = {
                    "base_url": deployment.model_url, "served_model": "fake-model",
                    "trainer": {"n_samples": 3, "contexts_per_step": 1,
                                "updates_per_step": 1, "lr": 1e-3},
                }  # fmt: skip
                job = api.post(
                    "/v1/training/jobs",
                    json={"name": "chaos", "contexts": "ctx", "model": str(tiny_model),
                          "params": params},
                ).json()["id"]  # fmt: skip
                env = {**deployment.base_env, "COBALT_TRAINER_ORCHESTRATOR_URL": deployment.url,
                       "COBALT_TRAINER_INFERENCE_URL": model_url.removesuffix("/v1"),
                       "COBALT_TRAINER_CHECKPOINT_DIR": str(checkpoints),
                       "COBALT_TRAINER_CHECKPOINT_OUTAGE_S": str(CHECKPOINT_OUTAGE_S),
                       "COBALT_TRAINER_POLL_INTERVAL_S": "0.05",
                       "COBALT_TRAINER_SAVE_EVERY": "1"}  # fmt: skip

                def start_trainer() -> subprocess.Popen[str]:
                    with (logs / f"trainer-{len(trainers)}.log").open("w") as out:
                        trainers.append(
                            subprocess.Popen(
                                [
                                    str(TRAINER_PYTHON),
                                    "-m",
                                    "cobalt.trainer",
                                    "serve",
                                    "--job",
                                    str(job),
                                    "--until-step",
                                    str(steps),
                                ],
                                env=env,
                                stdout=out,
                                stderr=subprocess.STDOUT,
                                text=True,
                                start_new_session=True,
                            )  # fmt: skip
                        )
                    return trainers[-1]

                def trainer_log() -> str:
                    return (logs / f"trainer-{len(trainers) - 1}.log").read_text()[-3000:]

                def step() -> int:
                    deadline = time.monotonic() + 60  # the API may be down or meet a fault
                    while time.monotonic() < deadline:
                        try:
                            shown = api.get(f"/v1/training/jobs/{job}", timeout=30)
                            if shown.status_code == 200:
                                return int(shown.json()["step"])
                        except httpx.TransportError:
                            pass
                        time.sleep(0.2)
                    raise AssertionError("the API did not answer for 60 s")

                def progressed(before: int) -> bool:
                    done = step() > before
                    assert done or trainers[-1].poll() is None, trainer_log()
                    return done

                start_trainer()
                wait_until(lambda: progressed(0), PROGRESS_TIMEOUT_S, "first step", logs=logs)

                def restart_trainer() -> None:
                    kill_9(trainers[-1])
                    start_trainer()

                def refusals() -> int:
                    """Writes the current trainer found the checkpoint volume refusing."""
                    log = logs / f"trainer-{len(trainers) - 1}.log"
                    return log.read_text().count("the checkpoint volume at")

                def fill_checkpoint_volume() -> None:
                    """Full for longer than the trainer waits: it exits 1 saying why, and
                    is started again once the volume has room."""
                    assert volume is not None
                    volume.fill()
                    code = trainers[-1].wait(timeout=PROGRESS_TIMEOUT_S)
                    assert code == 1, trainer_log()
                    assert "No space left on device" in trainer_log()
                    volume.free()
                    start_trainer()

                def make_checkpoint_volume_read_only() -> None:
                    """Read-only until the trainer's write was refused, then writable
                    again within its wait: it goes on by itself."""
                    assert volume is not None
                    seen = refusals()
                    volume.read_only()
                    try:
                        wait_until(lambda: refusals() > seen, PROGRESS_TIMEOUT_S, "a refusal")
                    finally:
                        volume.writable()

                inject = {
                    **deployment.faults(step),
                    "trainer-kill": restart_trainer,
                    "checkpoint-full": fill_checkpoint_volume,
                    "checkpoint-read-only": make_checkpoint_volume_read_only,
                }
                for kind in faults:
                    before = step()
                    if before >= steps:
                        break
                    injected = time.monotonic()
                    inject[kind]()
                    wait_until(
                        lambda b=before: progressed(b),
                        PROGRESS_TIMEOUT_S,
                        f"step after {kind}",
                        logs=logs,
                    )
                    log.record(kind, time.monotonic() - injected)
                assert trainers[-1].wait(timeout=PROGRESS_TIMEOUT_S) == 0, trainer_log()
                shown = api.get(f"/v1/training/jobs/{job}").json()
                # No write the faults cut short left its partial output behind.
                partial = [p.name for p in checkpoints.rglob("*") if "partial" in p.name]
                assert partial == []
        finally:
            for process in trainers:
                kill_9(process)
    print(log.table())  # the figures docs/benchmarks.md's Reliability section quotes

    assert shown["step"] == steps
    assert [s["step"] for s in shown["steps"]] == list(range(1, steps + 1))
    consumed = consumed_groups(store, job)
    with store() as session:
        assert [group.step for group in consumed] == list(range(1, steps + 1))
        # Each trained sample was sampled by the version its group is stamped with: the
        # one the model's response header named, read back from the response itself.
        for group in consumed:
            stamp = f"# policy version {group.policy_version}"
            assert group.samples and all(s.response.endswith(stamp) for s in group.samples)
            assert group.policy_version < group.step  # sampled before the step trained
        assert len({group.policy_version for group in consumed}) > 1
        turns = session.execute(
            select(Turn.trajectory_id, Turn.turn_index, func.count())
            .group_by(Turn.trajectory_id, Turn.turn_index)
            .having(func.count() > 1)
        ).all()
        assert turns == []
    assert all(process.poll() is not None for process in [*deployment.processes, *trainers])
    assert deployment.redis.process is None or deployment.redis.process.poll() is not None
