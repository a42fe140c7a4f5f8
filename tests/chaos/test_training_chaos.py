"""One training job driven through a sequence of faults, one kind after another (or, with
COBALT_CHAOS_FAULTS=N and COBALT_CHAOS_SEED=S, N faults drawn from seed S), and its end
state checked: every step trained, each on groups the ledger holds exactly once, every
trained sample stamped with the version it was sampled from, no duplicate turn, and every
process the test started gone.

Real processes and servers of the test's own: `cobalt worker` processes, the trainer in
.venv-trainer, a private redis-server (restarted with its data and empty), a TCP proxy in
front of the session's PostgreSQL database (connections dropped mid-transaction, then
refused), HTTP proxies in front of the executor and the model (503 and 429 for a while).
The deterministic test model stands in for vLLM (the inference-kill case needs the real
server and is not covered here)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import make_url

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
from cobalt.orchestrator.store.models import TrainingGroup, Turn
from cobalt.orchestrator.worker.runtime import close_runtime
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.chaos import (
    FaultLog,
    PrivateRedis,
    TcpFaultProxy,
    fault_sequence,
    kill_9,
    serve_http_proxy,
    wait_until,
)
from tests.support.databases import empty_database
from tests.support.runs import worker
from tests.support.serving import serve_asgi
from tests.support.training import TRAINER_PYTHON, answer, bandit_dataset

# Not yet in `make test` (issue 38 is open): the job passes, but the proxies' unclosed
# asyncio transports and psycopg's dropped connections surface at session end as
# unraisable-exception errors, and two fault kinds (UNRESOLVED) fail. COBALT_CHAOS=1 runs it.
if os.environ.get("COBALT_CHAOS") != "1":
    pytest.skip(
        "the chaos suite is opt-in until issue 38 lands: COBALT_CHAOS=1", allow_module_level=True
    )

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
]

KINDS = [
    "worker-kill",
    "redis-restart",
    "redis-restart-empty",
    "model-503",
    "model-429",
    "executor-503",
    "postgres-drop",
]
UNRESOLVED = ["postgres-unreachable", "trainer-kill"]
"""Kinds that do not pass yet, drawn only when COBALT_CHAOS_UNRESOLVED=1: after the TCP
proxy refused PostgreSQL connections for 3 s, every later connection through it still
failed ("server closed the connection unexpectedly") for 240 s, in two runs; whether the
proxy or the store's reconnect is at fault is not known yet. trainer-kill as the last
fault: the restarted trainer made no step in 240 s (one run; tests/orchestrator/training/
test_kill.py covers the kill itself, with a resume from a checkpoint)."""
if os.environ.get("COBALT_CHAOS_UNRESOLVED") == "1":
    KINDS += UNRESOLVED
FAULTS = int(os.environ.get("COBALT_CHAOS_FAULTS", "0"))
SEED = int(os.environ["COBALT_CHAOS_SEED"]) if "COBALT_CHAOS_SEED" in os.environ else None
PROGRESS_TIMEOUT_S = 240
"""Longest wait for the next step after a fault (round retry 5 s + a step on 2 busy cores)."""


@pytest.fixture
def database(tmp_path: Path) -> Iterator[str]:
    with empty_database("postgresql", tmp_path) as url:
        upgrade_database(url)
        yield url


def test_a_training_job_survives_each_fault_kind(
    database: str, tiny_model: Path, executor_url: str, tmp_path: Path
) -> None:
    faults = fault_sequence(KINDS, FAULTS, SEED)
    steps = len(faults) + 1
    redis = PrivateRedis(tmp_path / "redis")
    redis.start()
    pg_port = make_url(database).port or 5432
    postgres = TcpFaultProxy(pg_port)
    proxied_db = make_url(database).set(port=postgres.port).render_as_string(hide_password=False)
    engine = make_engine(database)
    sessions = make_sessionmaker(engine)
    bandit_dataset(sessions)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    log = FaultLog()
    workers: list[subprocess.Popen[str]] = []
    trainer: subprocess.Popen[str] | None = None
    try:
        with (
            serve_fake_openai(FakeOpenAI(responder=answer, delay_s=0.1)) as model_url,
            serve_http_proxy(model_url) as (model, proxied_model),
            serve_http_proxy(executor_url) as (executor, proxied_executor),
        ):
            services = {**base_env, "COBALT_DATABASE_URL": proxied_db,
                        "COBALT_EXECUTOR_URL": proxied_executor,
                        "COBALT_REDIS_URL": redis.url}  # fmt: skip
            workers = [worker(services), worker(services)]
            settings = OrchestratorSettings(database_url=proxied_db, redis_url=redis.url)
            with serve_asgi(create_app(settings)) as url, httpx.Client(base_url=url) as api:
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
                       "COBALT_TRAINER_INFERENCE_URL": "",
                       "COBALT_TRAINER_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
                       "COBALT_TRAINER_POLL_INTERVAL_S": "0.05",
                       "COBALT_TRAINER_ROUND_RETRY_S": "5",
                       "COBALT_TRAINER_SAVE_EVERY": "1"}  # fmt: skip

                def start_trainer() -> subprocess.Popen[str]:
                    return subprocess.Popen(
                        [str(TRAINER_PYTHON), "-m", "cobalt.trainer", "serve",
                         "--job", str(job), "--until-step", str(steps)],
                        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True, start_new_session=True,
                    )  # fmt: skip

                def step() -> int:
                    for _ in range(50):  # the API itself may meet the PostgreSQL fault
                        try:
                            shown = api.get(f"/v1/training/jobs/{job}", timeout=30)
                            if shown.status_code == 200:
                                return int(shown.json()["step"])
                        except httpx.TransportError:
                            pass
                        time.sleep(0.2)
                    raise AssertionError("the API did not answer for 10 s")

                trainer = start_trainer()
                wait_until(lambda: step() >= 1, PROGRESS_TIMEOUT_S, "first step")

                def restart_worker() -> None:
                    kill_9(workers[0])
                    workers[0] = worker(services)

                def restart_trainer() -> None:
                    nonlocal trainer
                    assert trainer is not None
                    kill_9(trainer)
                    trainer = start_trainer()

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
                }
                for kind in faults:
                    before = step()
                    injected = time.monotonic()
                    inject[kind]()
                    wait_until(
                        lambda b=before: step() > b, PROGRESS_TIMEOUT_S, f"step after {kind}"
                    )
                    log.record(kind, time.monotonic() - injected)
                    assert trainer.poll() is None or step() >= steps, trainer.communicate()[0]
                output, _ = trainer.communicate(timeout=PROGRESS_TIMEOUT_S)
                assert trainer.returncode == 0, output[-3000:]
                shown = api.get(f"/v1/training/jobs/{job}").json()
    finally:
        for process in [*workers, *([trainer] if trainer else [])]:
            kill_9(process)
        close_runtime()
        postgres.close()
        redis.close()
    print(log.table())  # the figures docs/benchmarks.md's Reliability section quotes

    assert shown["step"] == steps
    assert [s["step"] for s in shown["steps"]] == list(range(1, steps + 1))
    with sessions() as session:
        consumed = session.execute(
            select(TrainingGroup.step, func.count())
            .where(TrainingGroup.job_id == job, TrainingGroup.status == "consumed")
            .group_by(TrainingGroup.step)
            .order_by(TrainingGroup.step)
        ).all()
        assert [tuple(row) for row in consumed] == [(s, 1) for s in range(1, steps + 1)]
        stamps = session.execute(
            select(TrainingGroup.step, TrainingGroup.policy_version).where(
                TrainingGroup.job_id == job, TrainingGroup.status == "consumed"
            )
        ).all()
        # Observed: with no Cobalt inference (the scripted model) every group reads the job's
        # final version, so only the presence of a stamp is checked here; the stamp-equals-
        # sampling-version check needs the vLLM case (left to do).
        assert len(stamps) == steps and all(version is not None for _, version in stamps)
        turns = session.execute(
            select(Turn.trajectory_id, Turn.turn_index, func.count())
            .group_by(Turn.trajectory_id, Turn.turn_index)
            .having(func.count() > 1)
        ).all()
        assert turns == []
    engine.dispose()
    assert all(process.poll() is not None for process in workers)
    assert not redis.process or redis.process.poll() is not None
