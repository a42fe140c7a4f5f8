"""A run whose limits its executor would refuse is refused when it is created, before
anything of it is written: 422 naming the limit, the value, the maximum and the executor
setting that raises it (CLI: exit 2), and 503 (CLI: exit 3) when the executor cannot be
asked. Against a real executor whose maximum wall time is lowered to 5 s."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings
from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.models import Run, Trajectory
from cobalt.shared.clients import ExecutorClientSettings
from cobalt.shared.ports import free_port
from tests.fakes.openai_server import FakeOpenAI
from tests.support.cli import cobalt_here
from tests.support.runs import add_doubles, wait_finished
from tests.support.serving import serve_asgi, serve_executor

MAX_WALL_S = 5.0
"""The lowered maximum: under the lcb judge preset's reference limit (6 s)."""


@pytest.fixture(scope="module")
def strict_executor_url(
    executor_settings: ExecutorSettings, sandbox_pool: SandboxPool
) -> Iterator[str]:
    """A real executor (the shared sandbox pool) that allows at most 5 s per test."""
    settings = executor_settings.model_copy(update={"max_wall_s": MAX_WALL_S})
    with serve_executor(settings, sandbox_pool) as url:
        yield url


@contextmanager
def _api(store_url: str, executor: ExecutorClientSettings) -> Iterator[httpx.Client]:
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    with (
        serve_asgi(create_app(settings, executor)) as url,
        httpx.Client(base_url=url, timeout=120) as client,
    ):
        yield client


@pytest.fixture
def api(
    store_url: str, strict_executor_url: str, sessions: sessionmaker[Session]
) -> Iterator[httpx.Client]:
    with _api(store_url, ExecutorClientSettings(url=strict_executor_url)) as client:
        yield client


def _nothing_written(sessions: sessionmaker[Session]) -> bool:
    with sessions() as session:
        runs = session.scalar(select(func.count()).select_from(Run))
        trajectories = session.scalar(select(func.count()).select_from(Trajectory))
    return runs == 0 and trajectories == 0


def _run(dataset: str, model_url: str, **limits: float) -> dict[str, object]:
    return {"dataset": dataset, "base_url": model_url, "model": "fake-model", "n": 1,
            "limits": limits}  # fmt: skip


def test_a_wall_time_above_the_maximum_is_refused_with_the_fix(
    api: httpx.Client,
    sessions: sessionmaker[Session],
    fake_model: tuple[FakeOpenAI, str],
    strict_executor_url: str,
) -> None:
    dataset = add_doubles(sessions)
    fake, model_url = fake_model
    refused = api.post("/v1/runs", json=_run(dataset, model_url, wall_s=7.5))
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["type"] == "limit_too_high"
    assert "limits.wall_s is 7.5, above the executor's maximum of 5" in error["message"]
    assert "COBALT_EXECUTOR_MAX_WALL_S" in error["message"]
    assert strict_executor_url in error["message"]
    assert error["detail"]["limits"] == [
        {"field": "limits.wall_s", "value": 7.5, "maximum": MAX_WALL_S,
         "setting": "COBALT_EXECUTOR_MAX_WALL_S"},
    ]  # fmt: skip
    assert _nothing_written(sessions) and api.get("/v1/runs").json() == []
    assert fake.requests == []  # no program was ever asked for


def test_a_judge_presets_limit_above_the_maximum_is_refused_too(
    api: httpx.Client, sessions: sessionmaker[Session], fake_model: tuple[FakeOpenAI, str]
) -> None:
    """No limits asked: the lcb preset's 6 s would be used, and this executor allows 5."""
    dataset = add_doubles(sessions)
    _, model_url = fake_model
    body = {"dataset": dataset, "base_url": model_url, "model": "fake-model", "compare": "lcb"}
    refused = api.post("/v1/runs", json=body)
    assert refused.status_code == 422, refused.text
    message = refused.json()["error"]["message"]
    assert "limits.wall_s is 6" in message and "the lcb judge preset" in message
    assert _nothing_written(sessions)


def test_a_run_at_exactly_the_maximum_is_accepted_and_judged(
    api: httpx.Client, sessions: sessionmaker[Session], fake_model: tuple[FakeOpenAI, str]
) -> None:
    dataset = add_doubles(sessions)
    _, model_url = fake_model
    created = api.post("/v1/runs", json=_run(dataset, model_url, wall_s=MAX_WALL_S))
    assert created.status_code == 202, created.text
    run = wait_finished(api, created.json()["id"])
    # Finished, not failed: the executor itself took every program with these limits.
    assert run["status"] == "finished", run
    assert run["params"]["limits"]["wall_s"] == MAX_WALL_S


def test_a_refine_of_a_run_above_the_maximum_is_refused(
    store_url: str,
    executor_url: str,
    api: httpx.Client,
    sessions: sessionmaker[Session],
    fake_model: tuple[FakeOpenAI, str],
) -> None:
    """A refine run is judged with its sample run's limits: 6 s, sampled on an executor
    that allowed them, refused by one that allows 5."""
    dataset = add_doubles(sessions)
    _, model_url = fake_model
    with _api(store_url, ExecutorClientSettings(url=executor_url)) as roomy:
        created = roomy.post("/v1/runs", json=_run(dataset, model_url, wall_s=6.0))
        sample = wait_finished(roomy, created.json()["id"])
    assert sample["status"] == "finished"
    refused = api.post("/v1/runs/refine", json={"from_run": sample["id"], "turns": 1})
    assert refused.status_code == 422, refused.text
    message = refused.json()["error"]["message"]
    assert "limits.wall_s is 6" in message and f"sample run {sample['id']}" in message
    assert [run["id"] for run in api.get("/v1/runs").json()] == [sample["id"]]


def test_an_unreachable_executor_refuses_the_run_with_503(
    store_url: str, sessions: sessionmaker[Session], fake_model: tuple[FakeOpenAI, str]
) -> None:
    dataset = add_doubles(sessions)
    _, model_url = fake_model
    nowhere = f"http://127.0.0.1:{free_port()}"
    executor = ExecutorClientSettings(url=nowhere, client_max_retries=0)
    with _api(store_url, executor) as api:
        refused = api.post("/v1/runs", json=_run(dataset, model_url, wall_s=1.0))
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert error["type"] == "unavailable"
        assert f"cannot ask the executor at {nowhere} for its maximum limits" in error["message"]
    assert _nothing_written(sessions)


def test_the_cli_refuses_with_exit_2_and_the_fix(
    cli_env: dict[str, str],
    strict_executor_url: str,
    sessions: sessionmaker[Session],
    fake_model: tuple[FakeOpenAI, str],
) -> None:
    dataset = add_doubles(sessions)
    _, model_url = fake_model
    env = {**cli_env, "COBALT_EXECUTOR_URL": strict_executor_url}
    done = cobalt_here(
        env, "run", "sample", "--dataset", dataset, "--base-url", model_url,
        "--model", "fake-model", "--judge", "lcb",
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "limits.wall_s is 6, above the executor's maximum of 5" in done.stderr
    assert "raise COBALT_EXECUTOR_MAX_WALL_S on the executor" in done.stderr
    assert "Traceback" not in done.stderr
    assert _nothing_written(sessions)


def test_the_cli_exits_3_when_the_executor_cannot_be_asked(
    cli_env: dict[str, str], sessions: sessionmaker[Session], fake_model: tuple[FakeOpenAI, str]
) -> None:
    dataset = add_doubles(sessions)
    _, model_url = fake_model
    nowhere = f"http://127.0.0.1:{free_port()}"
    env = {**cli_env, "COBALT_EXECUTOR_URL": nowhere, "COBALT_EXECUTOR_CLIENT_MAX_RETRIES": "0"}
    done = cobalt_here(
        env, "run", "sample", "--dataset", dataset, "--base-url", model_url, "--model", "fake-model"
    )
    assert done.returncode == 3, done.stderr
    assert f"cannot ask the executor at {nowhere}" in done.stderr
    assert _nothing_written(sessions)
