"""The executor's HTTP API fuzzed from its own OpenAPI document (schemathesis), `/run_code`
included: generated valid and invalid requests over real HTTP against the real sandbox.
Whatever a client sends, the answer is never a 5xx, and a 2xx has the declared body.
Bounded and derandomized, so a run is repeatable (more: COBALT_FUZZ_EXAMPLES=500).
"""

from __future__ import annotations

import os

import schemathesis
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

from tests.support.openapi_fuzz import fuzz_operation

EXAMPLES = int(os.environ.get("COBALT_FUZZ_EXAMPLES", "15"))
CHECKS = [not_a_server_error, response_schema_conformance]


def test_every_generated_request_gets_a_client_answer(executor_url: str) -> None:
    schema = schemathesis.openapi.from_url(f"{executor_url}/openapi.json")
    failures: list[str] = []
    labels = []
    for result in schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            try:
                fuzz_operation(
                    operation, mode, executor_url, CHECKS, examples=EXAMPLES, timeout_s=120
                )
            except Unsatisfiable:
                assert mode.is_negative, operation.label  # no parameters, no body
            except Exception as exc:  # one operation's failure must not hide the others'
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert {"POST /v1/execute", "POST /v1/execute/batch", "POST /run_code"} <= set(labels)
    assert not failures, "\n\n".join(failures)
