"""The executor's HTTP API fuzzed from its own OpenAPI document (schemathesis), `/run_code`
included: generated valid and invalid requests over real HTTP against the real sandbox.
Whatever a client sends, the answer is never a 5xx, and a 2xx has the declared body.
Bounded and derandomized, so a run is repeatable (more: COBALT_FUZZ_EXAMPLES=500).
"""

from __future__ import annotations

import os
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance

EXAMPLES = int(os.environ.get("COBALT_FUZZ_EXAMPLES", "15"))
CHECKS = [not_a_server_error, response_schema_conformance]


def _fuzz(operation: Any, mode: schemathesis.GenerationMode, base_url: str) -> None:
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def never_a_server_error(case: schemathesis.Case) -> None:
        case.call_and_validate(base_url=base_url, checks=CHECKS, timeout=120)

    never_a_server_error()


def test_every_generated_request_gets_a_client_answer(executor_url: str) -> None:
    schema = schemathesis.openapi.from_url(f"{executor_url}/openapi.json")
    failures: list[str] = []
    labels = []
    for result in schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):
            try:
                _fuzz(operation, mode, executor_url)
            except Unsatisfiable:
                assert mode.is_negative, operation.label  # no parameters, no body
            except Exception as exc:  # one operation's failure must not hide the others'
                failures.append(f"{operation.label} ({mode.value}): {exc}")
    assert {"POST /v1/execute", "POST /v1/execute/batch", "POST /run_code"} <= set(labels)
    assert not failures, "\n\n".join(failures)
