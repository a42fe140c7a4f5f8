"""Bearer tokens on the orchestrator API: a read scope (GET) and a write scope (everything).

The check is attached once, at the router every /v1 route is included through, so the
route-by-route test below also covers routes added after it was written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.shared.clients.training import TrainingClient
from cobalt.shared.errors import Forbidden, NotFound, Unauthorized
from tests.support.serving import serve_asgi

READ, WRITE = "read-token-123", "write-token-456"


def _settings(tmp_path: Path, **tokens: str) -> OrchestratorSettings:
    return OrchestratorSettings(database_url=f"sqlite:///{tmp_path}/auth.db", **tokens)


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[str]:
    settings = _settings(tmp_path, orchestrator_read_token=READ, orchestrator_write_token=WRITE)
    with serve_asgi(create_app(settings)) as url:
        yield url


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_scopes(guarded: str) -> None:
    with httpx.Client(base_url=guarded, timeout=30) as api:
        assert api.get("/healthz").status_code == 200  # probes carry no token
        missing = api.get("/v1/runs")
        assert missing.status_code == 401 and missing.headers["WWW-Authenticate"] == "Bearer"
        assert missing.json()["error"]["type"] == "unauthorized"
        assert api.get("/v1/runs", headers=_bearer("nope")).status_code == 401
        assert api.get("/v1/runs", headers=_bearer(READ)).status_code == 200
        assert api.get("/v1/runs", headers=_bearer(WRITE)).status_code == 200
        run = {"dataset": "none", "base_url": "http://x/v1", "model": "m"}
        refused = api.post("/v1/runs", json=run, headers=_bearer(READ))
        assert refused.status_code == 403 and "read-only" in refused.json()["error"]["message"]
        claim = {"groups": 1, "current_version": 0, "max_staleness": 0}
        trainer = api.post("/v1/training/jobs/1/steps/1/claim", json=claim, headers=_bearer(READ))
        assert trainer.status_code == 403
        # The write token gets through to the route (which finds no such dataset).
        assert api.post("/v1/runs", json=run, headers=_bearer(WRITE)).status_code == 404


def test_every_route_needs_a_token(guarded: str) -> None:
    with httpx.Client(base_url=guarded, timeout=30) as api:
        # Every operation the app serves, from its own document: nothing can be left out.
        paths = api.get("/openapi.json").json()["paths"]
        operations = [(m, p) for p, ops in paths.items() if p != "/healthz" for m in ops]
        assert len(operations) >= 25
        for method, template in operations:
            path = re.sub(r"\{[^}]+\}", "1", template)
            answer = api.request(method.upper(), path)
            assert answer.status_code == 401, (method, template, answer.text)


def test_without_tokens_the_api_is_open_for_local_use(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert settings.orchestrator_host == "127.0.0.1"
    with serve_asgi(create_app(settings)) as url, httpx.Client(base_url=url) as api:
        assert api.get("/v1/runs").status_code == 200


def test_the_openapi_document_declares_the_enforced_scheme(tmp_path: Path) -> None:
    spec = create_app(_settings(tmp_path, orchestrator_write_token=WRITE)).openapi()
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for path, operations in spec["paths"].items():
        for operation in operations.values():
            secured = operation.get("security") == [{"HTTPBearer": []}]
            assert secured == path.startswith("/v1/"), path
            if secured:
                assert {"401", "403"} <= set(operation["responses"]), path


def test_token_settings_that_cannot_work_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="WRITE_TOKEN"):
        _settings(tmp_path, orchestrator_read_token=READ)
    with pytest.raises(ValidationError, match="must differ"):
        _settings(tmp_path, orchestrator_read_token=WRITE, orchestrator_write_token=WRITE)


def test_the_trainer_client_sends_its_token(guarded: str) -> None:
    with TrainingClient(guarded, token=WRITE) as client, pytest.raises(NotFound):
        client.job(999)
    with TrainingClient(guarded) as client, pytest.raises(Unauthorized):
        client.job(999)
    # Given the read token by mistake, the trainer is told so, not "upstream error".
    with TrainingClient(guarded, token=READ) as client, pytest.raises(Forbidden, match="write"):
        client.start_round(999, 1)
