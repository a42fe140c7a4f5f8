"""The orchestrator's REST API over real HTTP: runs started, watched, shown and evaluated."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runs import add_doubles, wait_finished
from tests.support.serving import serve_asgi


@pytest.fixture
def api(
    store_url: str,
    executor_url: str,
    sessions: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[httpx.Client]:
    monkeypatch.setenv("COBALT_EXECUTOR_URL", executor_url)
    monkeypatch.delenv("COBALT_REDIS_URL", raising=False)
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    with serve_asgi(create_app(settings)) as url, httpx.Client(base_url=url, timeout=120) as client:
        yield client


def test_runs_through_the_api(
    api: httpx.Client, sessions: sessionmaker[Session], fake_model: tuple[FakeOpenAI, str]
) -> None:
    dataset = add_doubles(sessions)
    _, url = fake_model
    assert api.get("/healthz").json() == {"status": "ok"}
    assert [d["name"] for d in api.get("/v1/datasets").json()["items"]] == [dataset]
    created = api.post(
        "/v1/runs",
        json={
            "dataset": dataset,
            "base_url": url,
            "model": "fake-model",
            "n": 3,
            "api_key": "secret-key",
        },
    )
    assert created.status_code == 202, created.text
    run = wait_finished(api, created.json()["id"])
    assert run["status"] == "finished" and run["turns_written"] == 6
    assert "api_key" not in run["params"] and "secret-key" not in str(run)
    refined = api.post("/v1/runs/refine", json={"from_run": run["id"], "turns": 1})
    assert refined.status_code == 202, refined.text
    refine = wait_finished(api, refined.json()["id"])
    assert refine["turns_written"] == 12
    report = api.post(f"/v1/runs/{refine['id']}/evaluate", params={"k": [2]}).json()
    assert report["pass_at_1"] == pytest.approx([1 / 3, 1.0])
    shown = api.get(f"/v1/runs/{refine['id']}", params={"turns": "true"}).json()
    assert len(shown["trajectories"]) == 6 and len(shown["trajectories"][0]["turns"]) == 2
    assert [r["id"] for r in api.get("/v1/runs").json()] == [refine["id"], run["id"]]


def test_a_refine_body_inherits_what_it_leaves_out(
    api: httpx.Client, sessions: sessionmaker[Session], fake_model: tuple[FakeOpenAI, str]
) -> None:
    """A key the body leaves out is the sample run's; one it sends overrides, even at the
    default (0.6 is `temperature`'s)."""
    dataset = add_doubles(sessions)
    fake, url = fake_model
    chosen = {"temperature": 0.2, "top_p": 0.5, "max_tokens": 321}
    body = {"dataset": dataset, "base_url": url, "model": "fake-model", "n": 1, **chosen}
    sample = wait_finished(api, api.post("/v1/runs", json=body).json()["id"])
    assert sample["status"] == "finished", sample
    fake.requests.clear()

    left_out = api.post("/v1/runs/refine", json={"from_run": sample["id"], "turns": 1})
    assert left_out.status_code == 202, left_out.text
    refine = wait_finished(api, left_out.json()["id"])
    assert refine["status"] == "finished", refine
    assert {key: refine["params"][key] for key in chosen} == chosen
    assert refine["params"]["turns"] == 1
    sent = {(r["temperature"], r["top_p"], r["max_tokens"]) for r in fake.requests}
    assert sent == {(0.2, 0.5, 321)} and len(fake.requests) == 2
    fake.requests.clear()

    at_default = api.post(
        "/v1/runs/refine", json={"from_run": sample["id"], "turns": 1, "temperature": 0.6}
    )
    refine = wait_finished(api, at_default.json()["id"])
    assert {key: refine["params"][key] for key in chosen} == {**chosen, "temperature": 0.6}
    assert {(r["temperature"], r["top_p"], r["max_tokens"]) for r in fake.requests} == {
        (0.6, 0.5, 321)
    }


def test_api_errors_use_the_envelope(
    api: httpx.Client, sessions: sessionmaker[Session], fake_model: tuple[FakeOpenAI, str]
) -> None:
    dataset = add_doubles(sessions)
    _, url = fake_model
    bad = api.post("/v1/runs", json={"dataset": dataset, "base_url": url, "model": "m", "n": 0})
    assert bad.status_code == 422 and "n" in bad.json()["error"]["message"]
    unknown = api.post("/v1/runs", json={"dataset": "nope", "base_url": url, "model": "m"})
    assert unknown.status_code == 404 and "nope" in unknown.json()["error"]["message"]
    assert api.get("/v1/runs/999").status_code == 404
    run_id = api.post(
        "/v1/runs", json={"dataset": dataset, "base_url": url, "model": "fake-model", "n": 1}
    ).json()["id"]
    wait_finished(api, run_id)
    again = api.post(f"/v1/runs/{run_id}/cancel")
    assert again.status_code == 409 and "already finished" in again.json()["error"]["message"]
    refine_of_refine = api.post("/v1/runs/refine", json={"from_run": 999})
    assert refine_of_refine.status_code == 404
