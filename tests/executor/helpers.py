"""Small helpers for executor tests."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient


def execute(
    client: TestClient, code: str, tests: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    """POST /v1/execute and return the JSON body, asserting HTTP 200."""
    response = client.post("/v1/execute", json={"code": code, "tests": tests, **extra})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def verdicts(body: dict[str, Any]) -> list[str]:
    return [result["verdict"] for result in body["results"]]
