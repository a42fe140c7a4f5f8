"""Every example in docs/executor.md runs as written against a real executor.

JSON blocks: a request with `tests` is posted to `/v1/execute` and must pass every test,
and the response block that follows it must hold the verdicts, outputs and counts the
request really gets (timings aside); a request without `tests` is posted to `/run_code`,
and the response block after it must match likewise. Python blocks run as they are, with
the documented address (`http://127.0.0.1:8100`) pointed at the test's server.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "executor.md"
DOCUMENTED_URL = "http://127.0.0.1:8100"
BLOCK = re.compile(r"^```(json|python)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
TIMINGS = {"wall_ms", "cpu_ms", "max_rss_kb", "execution_time", "executor_version"}


def blocks(kind: str) -> list[str]:
    return [text for found, text in BLOCK.findall(DOC.read_text()) if found == kind]


def without_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def test_the_page_has_its_examples() -> None:
    json_blocks = [json.loads(text) for text in blocks("json")]
    assert sum("tests" in b for b in json_blocks) >= 1
    assert sum("run_result" in b for b in json_blocks) >= 1
    assert len(blocks("python")) >= 3


def test_each_json_request_gets_the_documented_response(executor_url: str) -> None:
    answers: dict[str, Any] = {}  # the last answer of each route, for the response after it
    checked = 0
    with httpx.Client(base_url=executor_url, timeout=120) as client:
        for text in blocks("json"):
            example = json.loads(text)
            if "code" in example:
                route = "/v1/execute" if "tests" in example else "/run_code"
                response = client.post(route, json=example)
                assert response.status_code == 200, (text, response.text)
                answers[route] = response.json()
                if "tests" in example:
                    assert answers[route]["pass_rate"] == 1.0, answers[route]
                checked += 1
            else:
                route = "/v1/execute" if "results" in example else "/run_code"
                assert route in answers, f"a response before its request: {text}"
                assert without_timings(example) == without_timings(answers.pop(route)), text
                checked += 1
    assert checked >= 4


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_each_python_example_runs(executor_url: str, index: int) -> None:
    source = blocks("python")[index]
    assert DOCUMENTED_URL in source
    done = subprocess.run(
        [sys.executable, "-c", source.replace(DOCUMENTED_URL, executor_url)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (source, done.stderr[-2000:])
