"""The REST schema names every status a client can meet (the contracts' enums)."""

from __future__ import annotations

from typing import Any

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.shared.contracts.statuses import (
    RunKind,
    RunStatus,
    TrainingJobStatus,
    TrajectoryStatus,
)


def _enum_of(schema: dict[str, Any], model: str, field: str) -> list[str]:
    components = schema["components"]["schemas"]
    ref = components[model]["properties"][field]["$ref"].rsplit("/", 1)[-1]
    values: list[str] = components[ref]["enum"]
    return values


def test_openapi_lists_every_status_value(tmp_path: Any) -> None:
    app = create_app(OrchestratorSettings(database_url=f"sqlite:///{tmp_path}/x.db"))
    schema = app.openapi()
    assert _enum_of(schema, "RunPublic", "status") == [s.value for s in RunStatus]
    assert _enum_of(schema, "RunPublic", "kind") == [k.value for k in RunKind]
    assert _enum_of(schema, "TrajectoryPublic", "status") == [s.value for s in TrajectoryStatus]
    assert _enum_of(schema, "TrainingJobPublic", "status") == [s.value for s in TrainingJobStatus]
    # One route module per resource: every path is served, none twice.
    paths = set(schema["paths"])
    assert {"/healthz", "/v1/datasets", "/v1/runs", "/v1/runs/{run_id}/cancel"} <= paths
