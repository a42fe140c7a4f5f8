"""The orchestrator API under bad input (issue 21): every case answers a clear 4xx.

Each test is one of the inputs that used to get a 500 or leak something: integers beyond
PostgreSQL's `integer`, NUL characters, over-long names, malformed JSON, template paths,
oversized and half-sent bodies, and database errors that only the database can see.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import text
from sqlalchemy.exc import DataError, IntegrityError, OperationalError

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.runs import service as runs_service
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker
from cobalt.orchestrator.store.errors import DATABASE_TRANSLATIONS
from cobalt.shared.clients import ExecutorClientSettings
from cobalt.shared.contracts.runs import SampleRunRequest
from cobalt.shared.http import install_error_handlers
from tests.support.runs import REDIS_URL, TABLES, add_doubles
from tests.support.serving import serve_asgi


@pytest.fixture
def api(postgresql_url: str) -> Iterator[httpx.Client]:
    """The API on an emptied PostgreSQL store with the doubles dataset; runs are queued
    on a Redis database no worker reads, so nothing is rolled out."""
    engine = make_engine(postgresql_url)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
    add_doubles(make_sessionmaker(engine))
    engine.dispose()
    settings = OrchestratorSettings(
        database_url=postgresql_url,
        redis_url=REDIS_URL,
        orchestrator_max_body_bytes=64 << 10,
        orchestrator_body_timeout_s=0.5,
    )
    with serve_asgi(create_app(settings)) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def _run(**fields: object) -> dict[str, object]:
    return {"dataset": "doubles", "base_url": "http://127.0.0.1:9/v1", "model": "m", **fields}


def _error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    message: str = response.json()["error"]["message"]
    return message


@pytest.mark.parametrize(
    "path",
    [
        "/v1/runs/2147483648",
        "/v1/runs/99999999999999999999999",
        "/v1/runs/-1",
        "/v1/runs/2147483648/report",
        "/v1/runs/1/report?k=0",
        "/v1/training/jobs/2147483648",
        "/v1/datasets/doubles/problems?offset=2147483648",
        "/v1/search?q=x&run_id=2147483648",
    ],
)
def test_integers_beyond_the_store_are_refused(api: httpx.Client, path: str) -> None:
    assert _error(api.get(path), 422)


def test_the_largest_id_is_a_plain_not_found(api: httpx.Client) -> None:
    assert "2147483647" in _error(api.get("/v1/runs/2147483647"), 404)


@pytest.mark.parametrize(
    "path",
    [
        "/v1/datasets/a%00b/problems",
        "/v1/datasets/doubles/problems/x%00",
        "/v1/search?q=a%00b",
        "/v1/runs/1/hacking-cases?category=%00",
    ],
)
def test_nul_in_the_url_is_refused(api: httpx.Client, path: str) -> None:
    assert "NUL" in _error(api.get(path), 422)


def test_nul_in_a_body_string_is_refused_but_an_escaped_backslash_is_not(
    api: httpx.Client,
) -> None:
    assert "NUL" in _error(api.post("/v1/runs", json=_run(model="m\x00")), 422)
    # The text `\u0000` (an escaped backslash, then u0000) holds no NUL: it is stored.
    created = api.post("/v1/runs", json=_run(model="m\\u0000", n=1))
    assert created.status_code == 202, created.text
    assert created.json()["model"] == "m\\u0000"


def test_names_longer_than_their_columns_are_refused(api: httpx.Client) -> None:
    assert "model" in _error(api.post("/v1/runs", json=_run(model="m" * 201)), 422)
    assert "base_url" in _error(api.post("/v1/runs", json=_run(base_url="h" * 501)), 422)
    assert _error(api.get(f"/v1/datasets/{'d' * 201}/problems"), 422)
    longest = api.post("/v1/runs", json=_run(model="m" * 200, n=1))
    assert longest.status_code == 202, longest.text


def test_malformed_json_is_a_422_in_the_envelope(api: httpx.Client) -> None:
    headers = {"Content-Type": "application/json"}
    for body in (b'{"dataset": ', b"\xff\xfe not utf-8", b"[1, 2"):
        response = api.post("/v1/runs", content=body, headers=headers)
        assert response.json()["error"]["type"] == "invalid_input"
        assert "JSON" in _error(response, 422)


@pytest.mark.parametrize("template", ["/etc/passwd", "/no/such/file.toml", "../x", "a.toml"])
def test_a_template_path_is_refused_without_a_word_about_the_disk(
    api: httpx.Client, template: str
) -> None:
    message = _error(api.post("/v1/runs", json=_run(template=template)), 422)
    # The same answer for a file that exists and one that does not: nothing to probe with.
    assert message.replace(repr(template), "NAME") == (
        "no template named NAME; the server's templates: brief, default, reasoning "
        "(a request names one of these; template files are for the CLI)"
    )
    job = api.post(
        "/v1/training/jobs",
        json={"name": "j", "contexts": "c", "model": "m", "params": {"template": template}},
    )
    assert "no template named" in _error(job, 422)


def test_templates_by_name(api: httpx.Client) -> None:
    names = api.get("/v1/templates").json()["names"]
    assert names == ["brief", "default", "reasoning"]
    created = api.post("/v1/runs", json=_run(template="reasoning", n=1))
    assert created.status_code == 202, created.text
    assert created.json()["template_name"] == "reasoning"


def test_a_body_over_the_cap_is_413(api: httpx.Client) -> None:
    big = _run(model="m", padding="x" * (100 << 10))
    assert "larger than" in _error(api.post("/v1/runs", json=big), 413)


def test_a_half_sent_body_is_408(api: httpx.Client) -> None:
    address = urlsplit(str(api.base_url))
    with socket.create_connection((address.hostname, address.port), timeout=10) as conn:
        conn.sendall(
            b"POST /v1/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 100\r\n\r\n{"
        )
        answer = conn.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408"), answer


def test_large_run_creation_answers_before_its_trajectories_are_written(
    api: httpx.Client,
) -> None:
    created = api.post("/v1/runs", json=_run(n=1024))
    assert created.status_code == 202, created.text
    run = created.json()
    assert run["status"] == "pending" and run["total_trajectories"] == 2 * 1024
    deadline = time.monotonic() + 60
    while api.get(f"/v1/runs/{run['id']}").json()["trajectories_by_status"]["pending"] < 2048:
        assert time.monotonic() < deadline, "the trajectories were never written"
        time.sleep(0.05)


def test_a_resume_completes_a_creation_cut_short(postgresql_url: str) -> None:
    """The API process died between the run row and its trajectories: resume writes them."""
    engine = make_engine(postgresql_url)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
    sessions = make_sessionmaker(engine)
    add_doubles(sessions)
    request = SampleRunRequest.model_validate(_run(n=3, limit=1))
    no_executor = ExecutorClientSettings(url=None)  # its maximums are not what this is about
    run_id = runs_service.create_sample_run(
        sessions, request, executor=no_executor, defer_trajectories=True
    )
    assert runs_service.run_public(sessions, run_id).trajectories_by_status["pending"] == 0
    runs_service.reopen_failed(sessions, run_id)
    runs_service.reopen_failed(sessions, run_id)  # twice: nothing doubled
    public = runs_service.run_public(sessions, run_id)
    assert public.trajectories_by_status["pending"] == public.total_trajectories == 3
    engine.dispose()


def _raising(exc: Exception) -> TestClient:
    app = FastAPI()
    install_error_handlers(app, DATABASE_TRANSLATIONS)

    @app.get("/boom")
    def boom() -> None:
        raise exc

    return TestClient(app, raise_server_exceptions=False)


@pytest.mark.parametrize(
    ("exc", "status"),
    [
        (IntegrityError("INSERT", {}, Exception("duplicate key value name=secret")), 409),
        (DataError("INSERT", {}, Exception("value out of range")), 422),
        (OperationalError("SELECT", {}, Exception("connection refused")), 503),
    ],
)
def test_database_errors_that_get_through_are_not_500(exc: Exception, status: int) -> None:
    response = _raising(exc).get("/boom")
    assert response.status_code == status
    # The database's own words stay in the log: they may quote other rows.
    assert "secret" not in response.text and "range" not in response.text.split("(")[0]


def test_the_openapi_document_declares_what_the_server_sends(tmp_path: Path) -> None:
    app = create_app(OrchestratorSettings(database_url=f"sqlite:///{tmp_path}/x.db"))
    spec = app.openapi()
    assert "HTTPValidationError" not in spec["components"]["schemas"]
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")):
                    schema = response["content"]["application/json"]["schema"]
                    assert schema == {"$ref": "#/components/schemas/ErrorEnvelope"}, (path, status)
            if path.startswith("/v1/"):
                assert {"404", "413", "422"} <= set(operation["responses"]), (method, path)
    # No token configured: no security scheme declared, since none is enforced.
    assert "securitySchemes" not in spec["components"]
    run_id = spec["paths"]["/v1/runs/{run_id}"]["get"]["parameters"][0]["schema"]
    assert run_id["maximum"] == 2**31 - 1
