"""The orchestrator's REST API fuzzed from its own OpenAPI document (schemathesis).

Every operation gets generated requests, valid ones (within the document's limits) and
invalid ones (outside them), over real HTTP against the app on PostgreSQL and on SQLite
with a dataset in it. Each answer must be a 2xx or a 4xx the document
declares, with the body it declares: no 5xx, no undeclared status, no schema violation.
Examples are bounded and derandomized, so a run is repeatable and takes a minute or two.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis.errors import Unsatisfiable
from redis import Redis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import Engine

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.db import make_sessionmaker
from cobalt.shared.clients import ExecutorClientSettings
from tests.support.openapi_fuzz import fuzz_operation
from tests.support.runs import REDIS_URL, add_doubles
from tests.support.serving import serve_asgi

EXAMPLES = int(os.environ.get("COBALT_FUZZ_EXAMPLES", "20"))
"""Generated requests per operation, mode and store (more: COBALT_FUZZ_EXAMPLES=500)."""

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.fixture
def fuzzed_api(store_url: str, engine: Engine, executor_url: str) -> Iterator[str]:
    """The API on an emptied store (PostgreSQL, then SQLite: each refuses different
    values) holding the doubles dataset; runs go to a flushed Redis queue that no worker
    reads, so nothing is rolled out."""
    add_doubles(make_sessionmaker(engine))
    redis = Redis.from_url(REDIS_URL)
    redis.flushdb()
    settings_ = OrchestratorSettings(database_url=store_url, redis_url=REDIS_URL)
    app = create_app(settings_, ExecutorClientSettings(url=executor_url))
    try:
        with serve_asgi(app) as url:
            yield url
    finally:
        redis.flushdb()
        redis.close()


def _fuzz(operation: Any, mode: schemathesis.GenerationMode, base_url: str) -> None:
    checks = [*CHECKS, negative_data_rejection] if mode.is_negative else CHECKS
    fuzz_operation(operation, mode, base_url, checks, examples=EXAMPLES)


def test_every_generated_request_gets_a_declared_answer(fuzzed_api: str) -> None:
    schema = schemathesis.openapi.from_url(f"{fuzzed_api}/openapi.json")
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            try:
                _fuzz(operation, mode, fuzzed_api)
            except Unsatisfiable:
                # Nothing to get wrong: an operation without parameters or body.
                assert mode.is_negative, operation.label
            except Exception as exc:  # one operation's failure must not hide the others'
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert operations >= 25
    assert not failures, "\n\n".join(failures)
