"""Small helpers for executor tests."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
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


def wait_ready(client: Any, timeout_s: float = 30.0) -> dict[str, Any]:
    """GET /readyz until it is 200 (the first canary runs just after start-up)."""
    deadline = time.monotonic() + timeout_s
    while True:
        response = client.get("/readyz")
        if response.status_code == 200 or time.monotonic() > deadline:
            assert response.status_code == 200, response.text
            body: dict[str, Any] = response.json()
            return body
        time.sleep(0.05)


INTEGRITY_LIMITS = {
    "MAX_PENDING_TESTS": "40",
    "MAX_RESPONSE_BYTES": "200000",
    "HEADER_TIMEOUT_S": "2",
    "BODY_TIMEOUT_S": "2",
    "READINESS_INTERVAL_S": "1",
}
"""Server settings of the integrity tests (small, so that limits are reached quickly)."""


def fill_one_test_queue(url: str, seconds: float) -> threading.Thread:
    """Hold the queue of an executor that holds one test (`MAX_PENDING_TESTS=1`) with a
    `/run_code` program that sleeps `seconds`; returns (the thread posting it) once it runs."""
    body = {"code": f"import time\ntime.sleep({seconds})", "run_timeout": seconds + 5}
    thread = threading.Thread(
        target=httpx.post, args=(f"{url}/run_code",), kwargs={"json": body, "timeout": 60}
    )
    thread.start()
    deadline = time.monotonic() + 20
    while "cobalt_executor_pending_tests 1.0" not in httpx.get(f"{url}/metrics").text:
        assert time.monotonic() < deadline, "the filler never held the queue"
        time.sleep(0.02)
    return thread
