"""`cobalt up` with the servers it is for: PostgreSQL and Redis configured, it starts the
executor, the orchestrator API and 2 RQ workers; a run posted to the API is rolled out by
those workers from the queue, and Ctrl-C stops every service (workers leave RQ cleanly)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest
from redis import Redis
from rq import Worker

from cobalt.demo.processes import port_is_free
from cobalt.shared.ports import free_port
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runs import REDIS_URL, wait_finished
from tests.support.up import cobalt_up

pytestmark = pytest.mark.slow


def test_up_with_postgresql_and_redis_rolls_a_run_out_on_its_workers(
    pg_dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    rq_env: dict[str, str],
    tmp_path: Path,
) -> None:
    fake, model_url = fake_model
    executor_port, api_port = free_port(), free_port()
    env = {k: v for k, v in rq_env.items() if k != "COBALT_EXECUTOR_URL"}  # up starts its own
    env |= {
        "COBALT_EXECUTOR_PORT": str(executor_port),
        "COBALT_ORCHESTRATOR_PORT": str(api_port),
        "COBALT_EXECUTOR_SLOTS": "1",
    }
    redis = Redis.from_url(REDIS_URL)
    logs = tmp_path / "logs"
    with cobalt_up("--no-inference", "--workers", "2", "--log-dir", str(logs), env=env) as up:
        deadline = time.monotonic() + 60
        while len(Worker.all(connection=redis)) < 2:  # each registers once it has started
            assert up.process.poll() is None and time.monotonic() < deadline, up.stderr
            time.sleep(0.2)
        with httpx.Client(base_url=f"http://127.0.0.1:{api_port}", timeout=30) as api:
            created = api.post(
                "/v1/runs",
                json={"dataset": pg_dataset, "base_url": model_url, "model": "fake-model",
                      "n": 2},
            )  # fmt: skip
            assert created.status_code == 202, created.text
            run = wait_finished(api, created.json()["id"])
        assert run["status"] == "finished" and run["turns_written"] == 2 * 2  # 2 problems
        assert len(fake.requests) == 2  # one request with n=2 per problem, from the workers
        worker_logs = "".join((logs / f"worker-{i}.log").read_text() for i in (1, 2))
        assert "roll_out" in worker_logs or "Job OK" in worker_logs, worker_logs[-2000:]
    stderr = up.stderr
    assert up.process.returncode == 0, stderr
    assert "rollouts: 2 RQ workers on Redis" in stderr
    assert port_is_free(executor_port) and port_is_free(api_port)
    assert Worker.all(connection=redis) == []  # the workers unregistered on the way out
    redis.close()
