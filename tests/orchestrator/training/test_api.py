"""Training over the orchestrator's REST API, as the CLI and the trainer use it: jobs, a
round rolled out in the API process (no Redis) or by an RQ worker (Redis), steps claimed
and reported, errors as 4xx with a message."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.training.staleness import rounds_to_begin
from cobalt.shared.contracts.training import group_list_key
from tests.fakes.openai_server import FakeOpenAI
from tests.support.chaos import PrivateRedis
from tests.support.runs import REDIS_URL, worker
from tests.support.serving import serve_asgi
from tests.support.training import bandit_dataset


def serve(store_url: str, redis_url: str | None) -> Any:
    settings = OrchestratorSettings(database_url=store_url, redis_url=redis_url)
    return serve_asgi(create_app(settings))


@pytest.fixture
def api(
    store_url: str, executor_url: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[httpx.Client]:
    monkeypatch.setenv("COBALT_EXECUTOR_URL", executor_url)
    with serve(store_url, None) as url, httpx.Client(base_url=url, timeout=60) as client:
        yield client


def job_body(url: str, policy_dir: Path, name: str = "job") -> dict[str, Any]:
    return {
        "name": name,
        "contexts": "ctx",
        "model": str(policy_dir),
        "params": {"base_url": url, "served_model": "fake-model",
                   "trainer": {"n_samples": 3, "contexts_per_step": 2}},
    }  # fmt: skip


def claim_when_ready(api: httpx.Client, job_id: int, step: int) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        batch: dict[str, Any] = api.post(
            f"/v1/training/jobs/{job_id}/steps/{step}/claim",
            json={"groups": 2, "current_version": 7, "max_staleness": 0},
        ).json()
        if batch["ready"]:
            return batch
        job = api.get(f"/v1/training/jobs/{job_id}").json()
        assert job["status"] != "failed", job["error"]
        assert time.monotonic() < deadline, batch
        time.sleep(0.1)


def test_a_step_through_the_api(
    api: httpx.Client,
    sessions: sessionmaker[Session],
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    bandit_dataset(sessions)
    _, url = model
    created = api.post("/v1/training/jobs", json=job_body(url, policy_dir))
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    assert created.json()["status"] == "pending" and created.json()["contexts"] == "ctx"
    started = api.post(f"/v1/training/jobs/{job_id}/rounds/1")
    assert started.status_code == 202 and started.json()["queued"] is False
    batch = claim_when_ready(api, job_id, 1)
    assert [len(g["samples"]) for g in batch["groups"]] == [3, 3]
    assert all(len(s["response_token_ids"]) == len(s["response_logprobs"])
               for g in batch["groups"] for s in g["samples"])  # fmt: skip
    reported = api.post(
        f"/v1/training/jobs/{job_id}/steps",
        json={"step": 1, "policy_version": 8, "metrics": {"reward_mean": 0.25}},
    ).json()
    assert (reported["step"], reported["policy_version"], reported["status"]) == (1, 8, "running")
    assert reported["steps"][0]["metrics"] == {"reward_mean": 0.25}
    assert api.get("/v1/training/jobs").json()["total"] == 1

    stopped = api.post(f"/v1/training/jobs/{job_id}/stop").json()
    assert stopped["status"] == "stopped"
    refused = api.post(f"/v1/training/jobs/{job_id}/rounds/2")
    assert refused.status_code == 409 and "resume" in refused.json()["error"]["message"]
    assert api.post(f"/v1/training/jobs/{job_id}/resume").json()["status"] == "running"


def test_bad_requests_get_4xx_with_a_message(
    api: httpx.Client,
    sessions: sessionmaker[Session],
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    bandit_dataset(sessions)
    _, url = model
    unknown = api.post("/v1/training/jobs", json={**job_body(url, policy_dir), "contexts": "no"})
    assert unknown.status_code == 404 and "no" in unknown.json()["error"]["message"]
    body = job_body(url, policy_dir)
    body["params"]["trainer"]["n_samples"] = 1
    one_sample = api.post("/v1/training/jobs", json=body)
    assert one_sample.status_code == 422 and "n_samples" in one_sample.json()["error"]["message"]
    job_id = api.post("/v1/training/jobs", json=job_body(url, policy_dir)).json()["id"]
    duplicate = api.post("/v1/training/jobs", json=job_body(url, policy_dir))
    assert duplicate.status_code == 409
    assert api.get("/v1/training/jobs/999").status_code == 404
    early = api.post(f"/v1/training/jobs/{job_id}/steps", json={"step": 1, "policy_version": 1})
    assert early.status_code == 409 and "never claimed" in early.json()["error"]["message"]
    skipped = api.post(
        f"/v1/training/jobs/{job_id}/steps/3/claim",
        json={"groups": 2, "current_version": 0, "max_staleness": 0},
    )
    assert skipped.status_code == 422 and "claim 1 next" in skipped.json()["error"]["message"]


def test_the_api_says_which_rounds_a_trainer_on_a_step_begins(
    api: httpx.Client,
    sessions: sessionmaker[Session],
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    """The off-policy window is the orchestrator's (`staleness.rounds_to_begin`, with the
    job's `max_staleness` and budget); the trainer only starts what it is told."""
    bandit_dataset(sessions)
    _, url = model
    body = job_body(url, policy_dir)
    body["params"] |= {"max_staleness": 2, "max_steps": 3}
    job_id = api.post("/v1/training/jobs", json=body).json()["id"]
    rounds = {
        step: api.get(f"/v1/training/jobs/{job_id}/steps/{step}/rounds").json() for step in (1, 2)
    }
    # The rule's own answer (its values: test_staleness.py), for the job's window and budget.
    assert rounds == {
        step: {"step": step, "rounds": list(rounds_to_begin(step, max_staleness=2, budget=3))}
        for step in (1, 2)
    }
    step_zero = api.get(f"/v1/training/jobs/{job_id}/steps/0/rounds")
    assert step_zero.status_code == 422 and "count from 1" in step_zero.json()["error"]["message"]
    assert api.get("/v1/training/jobs/999/steps/1/rounds").status_code == 404


def test_a_round_on_redis_is_rolled_out_by_an_rq_worker(
    postgresql_url: str,
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deployment shape: the API queues the round, a `cobalt worker` process takes it,
    writes the ledger and pushes each group's id on the job's Redis list."""
    from redis import Redis

    if store_url != postgresql_url:
        pytest.skip("the worker process and the API share the PostgreSQL store")
    bandit_dataset(sessions)
    _, url = model
    redis = Redis.from_url(REDIS_URL)
    redis.flushdb()
    with serve(store_url, REDIS_URL) as base, httpx.Client(base_url=base, timeout=60) as api:
        job_id = api.post("/v1/training/jobs", json=job_body(url, policy_dir)).json()["id"]
        started = api.post(f"/v1/training/jobs/{job_id}/rounds/1").json()
        assert started["queued"] is True
        env = {
            "PATH": "/usr/bin:/bin",
            "COBALT_DATABASE_URL": store_url,
            "COBALT_EXECUTOR_URL": executor_url,
            "COBALT_REDIS_URL": REDIS_URL,
        }
        output, _ = worker(env, "--burst").communicate(timeout=180)
        batch = claim_when_ready(api, job_id, 1)
    pushed = sorted(int(i) for i in redis.lrange(group_list_key(job_id), 0, -1))
    assert pushed == sorted(g["id"] for g in batch["groups"]), output
    redis.flushdb()
    redis.close()


def test_a_round_that_fails_in_the_api_process_fails_the_job(
    api: httpx.Client, sessions: sessionmaker[Session], policy_dir: Path
) -> None:
    """No model where the job points: the round's thread marks the job failed with the
    reason, so a trainer waiting for the step stops instead of waiting for ever."""
    bandit_dataset(sessions)
    body = job_body("http://127.0.0.1:9/v1", policy_dir)
    job_id = api.post("/v1/training/jobs", json=body).json()["id"]
    assert api.post(f"/v1/training/jobs/{job_id}/rounds/1").status_code == 202
    deadline = time.monotonic() + 120
    while (job := api.get(f"/v1/training/jobs/{job_id}").json())["status"] != "failed":
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    assert "round 1" in job["error"] and "cannot reach the model endpoint" in job["error"]
    assert job["groups"] == {"ready": 0, "consumed": 0, "stale": 0, "dropped": 0}


def test_a_round_asked_for_while_redis_is_down_answers_503_and_queues_once_it_is_back(
    sessions: sessionmaker[Session], store_url: str, policy_dir: Path, tmp_path: Path
) -> None:
    """Redis restarting: the API says 503 (the trainer asks again), not 500; nothing is
    lost, and asking again once Redis answers queues the round."""
    from redis import Redis

    bandit_dataset(sessions)
    redis = PrivateRedis(tmp_path / "redis")
    try:
        with serve(store_url, redis.url) as base, httpx.Client(base_url=base, timeout=60) as api:
            job_id = api.post("/v1/training/jobs", json=job_body("http://x/v1", policy_dir))
            path = f"/v1/training/jobs/{job_id.json()['id']}/rounds/1"
            down = api.post(path)
            assert down.status_code == 503, down.text
            assert "COBALT_REDIS_URL" in down.json()["error"]["message"]
            redis.start()
            assert api.post(path).json()["queued"] is True
        with Redis.from_url(redis.url) as queue:
            assert queue.llen("rq:queue:cobalt-rollouts") == 2
    finally:
        redis.close()
