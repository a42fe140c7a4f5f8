"""One training job driven through a sequence of faults, one kind after another (or, with
COBALT_CHAOS_FAULTS=N and COBALT_CHAOS_SEED=S, N faults drawn from seed S), and its end
state checked: every step trained, each on groups the ledger holds exactly once, every
trained sample sampled by the policy version its group is stamped with, no duplicate turn,
and every process the test started gone. docs/deploy.md ("When a part fails mid-job")
says what each fault does to a deployment.

Real processes and servers of the test's own: `cobalt orchestrator serve`, `cobalt worker`
processes, the trainer in .venv-trainer (each killed with -9 and restarted), a private
redis-server (restarted with its data and empty), a TCP proxy in front of the session's
PostgreSQL database (connections dropped mid-transaction, then refused), HTTP proxies in
front of the executor and the model (503 and 429 for a while), and the trainer's checkpoint
volume on a tmpfs of the test's own (filled up, remounted read-only). The deterministic test
model stands in for vLLM, with the inference service's control path: the trainer
publishes each version to it, and it writes the version it serves into every response
(the inference-kill case needs the real server and is not covered here). Each process's
output goes to a file under the test's tmp_path (logs/), shown when the trainer fails."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
from cobalt.orchestrator.store.models import TrainingGroup, Turn
from cobalt.shared.ports import free_port
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.chaos import (
    FaultLog,
    PrivateRedis,
    TcpFaultProxy,
    answers,
    fault_sequence,
    kill_9,
    ready,
    serve_http_proxy,
    stall,
    wait_until,
)
from tests.support.databases import empty_database
from tests.support.runs import cobalt_process, worker
from tests.support.training import TRAINER_PYTHON, answer, bandit_dataset
from tests.support.volumes import can_mount, small_volume

pytestmark = pytest.mark.slow

KINDS = [
    "worker-kill",
    "redis-restart",
    "redis-restart-empty",
    "model-503",
    "model-429",
    "executor-503",
    "executor-stall",
    "postgres-drop",
    "postgres-unreachable",
    "trainer-kill",
    "api-kill",
    "executor-kill",
    "checkpoint-full",
    "checkpoint-read-only",
]
CHECKPOINT_KINDS = ("checkpoint-full", "checkpoint-read-only")
"""On a tmpfs of the test's own (tests/support/volumes.py), where it can mount one."""
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


@pytest.fixture
def database(tmp_path: Path) -> Iterator[str]:
    with empty_database("postgresql", tmp_path) as url:
        upgrade_database(url)
        yield url


@pytest.fixture
def store(database: str) -> Iterator[sessionmaker[Session]]:
    """Sessions on the database directly (not through the fault proxy)."""
    engine = make_engine(database)
    yield make_sessionmaker(engine)
    engine.dispose()


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
    logs = tmp_path / "logs"
    logs.mkdir()
    redis = PrivateRedis(tmp_path / "redis")
    redis.start()
    pg_port = make_url(database).port or 5432
    postgres = TcpFaultProxy(pg_port)
    proxied_db = make_url(database).set(port=postgres.port).render_as_string(hide_password=False)
    bandit_dataset(store)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    log = FaultLog()
    workers: list[subprocess.Popen[str]] = []
    trainers: list[subprocess.Popen[str]] = []
    apis: list[subprocess.Popen[str]] = []
    # The model serves the version the trainer last published to it (as Cobalt's inference
    # service does) and writes it into each response, so every stored sample says which
    # policy sampled it.
    fake = FakeOpenAI(responder=answer, delay_s=0.1, policy_version=0, mark_version=True)
    executor_port = free_port()
    executors: list[subprocess.Popen[str]] = []
    checkpoints = tmp_path / "checkpoints"
    cleanup = contextlib.ExitStack()
    volume = (
        cleanup.enter_context(small_volume(checkpoints, VOLUME_BYTES))
        if cannot_mount is None
        else None
    )

    def start_executor() -> None:
        """`cobalt executor serve` on the test's port, once its sandboxes are ready."""
        executors.append(
            cobalt_process(
                base_env,
                "executor",
                "serve",
                "--port",
                str(executor_port),
                "--slots",
                "2",
                log=logs / "executor.log",
            )  # fmt: skip
        )
        wait_until(lambda: ready(f"http://127.0.0.1:{executor_port}/readyz"), 90, "executor")

    try:
        start_executor()
        executor_url = f"http://127.0.0.1:{executor_port}"
        with (
            serve_fake_openai(fake) as model_url,
            serve_http_proxy(model_url) as (model, proxied_model),
            serve_http_proxy(executor_url) as (executor, proxied_executor),
        ):
            services = {**base_env, "COBALT_DATABASE_URL": proxied_db,
                        "COBALT_EXECUTOR_URL": proxied_executor,
                        "COBALT_EXECUTOR_CLIENT_TIMEOUT_S": str(EXECUTOR_TIMEOUT_S),
                        "COBALT_REDIS_URL": redis.url}  # fmt: skip

            def start_worker() -> subprocess.Popen[str]:
                return worker(services, log=logs / "workers.log")

            workers = [start_worker(), start_worker()]
            url = f"http://127.0.0.1:{free_port()}"

            def start_api() -> subprocess.Popen[str]:
                """`cobalt orchestrator serve` on the test's port, once it answers."""
                port = url.rsplit(":", 1)[1]
                started = cobalt_process(
                    services, "orchestrator", "serve", "--port", port, log=logs / "api.log"
                )
                wait_until(lambda: answers(int(port)), 60, "orchestrator API")
                return started

            apis = [start_api()]
            with httpx.Client(base_url=url) as api:
                params: dict[str, Any] = {
                    "base_url": proxied_model, "served_model": "fake-model",
                    "trainer": {"n_samples": 3, "contexts_per_step": 1,
                                "updates_per_step": 1, "lr": 1e-3},
                }  # fmt: skip
                job = api.post(
                    "/v1/training/jobs",
                    json={"name": "chaos", "contexts": "ctx", "model": str(tiny_model),
                          "params": params},
                ).json()["id"]  # fmt: skip
                env = {**base_env, "COBALT_TRAINER_ORCHESTRATOR_URL": url,
                       "COBALT_TRAINER_INFERENCE_URL": model_url.removesuffix("/v1"),
                       "COBALT_TRAINER_CHECKPOINT_DIR": str(checkpoints),
                       "COBALT_TRAINER_CHECKPOINT_OUTAGE_S": str(CHECKPOINT_OUTAGE_S),
                       "COBALT_TRAINER_POLL_INTERVAL_S": "0.05",
                       "COBALT_TRAINER_ROUND_RETRY_S": "5",
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
                wait_until(lambda: progressed(0), PROGRESS_TIMEOUT_S, "first step")

                def restart_worker() -> None:
                    kill_9(workers[0])
                    workers[0] = start_worker()

                def restart_executor() -> None:
                    kill_9(executors[-1])
                    start_executor()

                def stall_executor() -> None:
                    """Stop the executor past its clients' timeout, once a judgement is in
                    flight (or the job moved on without one: the rounds were judged)."""
                    seen, before = executor.forwarded, step()
                    wait_until(
                        lambda: executor.forwarded > seen or step() > before, 60, "a judgement"
                    )
                    stall(executors[-1].pid, EXECUTOR_TIMEOUT_S + 2)

                def restart_api() -> None:
                    kill_9(apis[-1])
                    apis.append(start_api())

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

                inject: dict[str, Callable[[], None]] = {
                    "worker-kill": restart_worker,
                    "redis-restart": lambda: redis.restart(empty=False),
                    "redis-restart-empty": lambda: redis.restart(empty=True),
                    "model-503": lambda: model.fail_for(3, 503),
                    "model-429": lambda: model.fail_for(3, 429),
                    "executor-503": lambda: executor.fail_for(3, 503),
                    "postgres-drop": postgres.drop_all,
                    "postgres-unreachable": lambda: postgres.refuse_for(3),
                    "trainer-kill": restart_trainer,
                    "api-kill": restart_api,
                    "executor-kill": restart_executor,
                    "executor-stall": stall_executor,
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
                        lambda b=before: progressed(b), PROGRESS_TIMEOUT_S, f"step after {kind}"
                    )
                    log.record(kind, time.monotonic() - injected)
                assert trainers[-1].wait(timeout=PROGRESS_TIMEOUT_S) == 0, trainer_log()
                shown = api.get(f"/v1/training/jobs/{job}").json()
                # No write the faults cut short left its partial output behind.
                partial = [p.name for p in checkpoints.rglob("*") if "partial" in p.name]
                assert partial == []
    finally:
        for process in [*workers, *trainers, *apis, *executors]:
            kill_9(process)
        postgres.close()
        redis.close()
        cleanup.close()
    print(log.table())  # the figures docs/benchmarks.md's Reliability section quotes

    assert shown["step"] == steps
    assert [s["step"] for s in shown["steps"]] == list(range(1, steps + 1))
    with store() as session:
        consumed = session.scalars(
            select(TrainingGroup)
            .where(TrainingGroup.job_id == job, TrainingGroup.status == "consumed")
            .order_by(TrainingGroup.step)
        ).all()
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
    everything = [*workers, *trainers, *apis, *executors]
    assert all(process.poll() is not None for process in everything)
    assert redis.process is None or redis.process.poll() is not None
