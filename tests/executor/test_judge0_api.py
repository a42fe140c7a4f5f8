"""Judge0's API over the executor: its store of pending submissions is bounded, and no
input becomes a 5xx (the SDK's own flows are in test_judge_clients.py)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from cobalt.executor.app import create_app
from cobalt.executor.judge0 import DEFAULT_FIELDS, JUDGE0_LANGUAGES, STATUSES, status_of
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.contracts import TestResult, Verdict


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.fixture(scope="module")
def small_store(sandbox_pool: SandboxPool) -> Iterator[TestClient]:
    """An executor whose Judge0 store holds 2 submissions for 1 s after they finish."""
    settings = ExecutorSettings(
        slots=sandbox_pool.config.slots, judge0_max_submissions=2, judge0_result_ttl_s=1
    )
    with TestClient(create_app(settings, pool=sandbox_pool)) as client:
        yield client


def wait_done(client: TestClient, token: str) -> dict[str, object]:
    deadline = time.monotonic() + 30
    while True:
        body: dict[str, object] = client.get(f"/submissions/{token}", params={"fields": "*"}).json()
        if body["status"]["id"] not in (1, 2):  # type: ignore[index]
            return body
        assert time.monotonic() < deadline
        time.sleep(0.05)


def test_a_full_store_refuses_with_503_and_retry_after_until_results_expire(
    small_store: TestClient,
) -> None:
    body = {"source_code": "print(1)", "language_id": 71}
    tokens = [small_store.post("/submissions", json=body).json()["token"] for _ in range(2)]
    refused = small_store.post("/submissions", json=body)
    assert refused.status_code == 503, refused.text
    assert refused.json()["error"]["type"] == "submissions_full"
    assert "COBALT_EXECUTOR_JUDGE0_MAX_SUBMISSIONS" in refused.json()["error"]["message"]
    assert int(refused.headers["Retry-After"]) >= 1
    for token in tokens:
        assert wait_done(small_store, token)["stdout"] == "1\n"
    time.sleep(1.1)  # the results expire: their tokens are gone and there is room again
    gone = small_store.get(f"/submissions/{tokens[0]}")
    assert gone.status_code == 404 and "COBALT_EXECUTOR_JUDGE0_RESULT_TTL_S" in gone.text
    assert small_store.post("/submissions", json=body).status_code == 201


def test_wait_true_answers_with_the_result(executor_client: TestClient) -> None:
    body = {"source_code": b64("print(input()[::-1])"), "language_id": 71, "stdin": b64("abc")}
    response = executor_client.post(
        "/submissions", params={"base64_encoded": "true", "wait": "true"}, json=body
    )
    assert response.status_code == 201, response.text
    result = response.json()
    assert result["status"] == {"id": 3, "description": "Accepted"}
    assert base64.b64decode(result["stdout"]) == b"cba\n"
    assert set(result) == set(DEFAULT_FIELDS)  # Judge0's default fields, no more


@pytest.mark.parametrize(
    ("body", "params", "says"),
    [
        (
            {"source_code": "!!", "language_id": 71},
            {"base64_encoded": "true"},
            "source_code is not valid base64",
        ),
        ({"source_code": "print(1)", "language_id": 70}, {}, "language_id 70 is not run"),
        (
            {"source_code": "print(1)", "language_id": 71, "cpu_time_limit": 601},
            {},
            "cpu_time_limit is 601",
        ),
        (
            {"source_code": "print(1)", "language_id": 71, "memory_limit": 1e8},
            {},
            "memory_limit is 1e+08",
        ),
        ({"source_code": "print(1)", "language_id": 71, "enable_network": True}, {}, "no network"),
        (
            {"source_code": "print(1)", "language_id": 71, "compiler_options": "-O2"},
            {},
            "compiler_options",
        ),
        ({"language_id": 71}, {}, "source_code"),
    ],
    ids=["base64", "language", "cpu", "memory", "network", "compiler-options", "no-code"],
)
def test_a_submission_this_executor_cannot_run_is_a_422_naming_its_field(
    executor_client: TestClient, body: dict[str, object], params: dict[str, str], says: str
) -> None:
    response = executor_client.post("/submissions", params=params, json=body)
    assert response.status_code == 422, response.text
    assert says in response.json()["error"]["message"]


def test_a_batch_over_20_or_with_a_bad_item_is_refused_whole(executor_client: TestClient) -> None:
    good = {"source_code": "print(1)", "language_id": 71}
    too_many = executor_client.post("/submissions/batch", json={"submissions": [good] * 21})
    assert too_many.status_code == 422
    bad = executor_client.post(
        "/submissions/batch", json={"submissions": [good, {**good, "language_id": 1}]}
    )
    assert bad.status_code == 422 and bad.json()["error"]["message"].startswith("submissions.1:")


def test_languages_and_statuses_are_judge0s(executor_client: TestClient) -> None:
    offered = executor_client.get("/v1/info").json()["languages"]
    languages = executor_client.get("/languages").json()
    assert [x["id"] for x in languages] == [x.id for x in JUDGE0_LANGUAGES if x.language in offered]
    assert executor_client.get("/languages/71").json()["source_file"] == "script.py"
    assert executor_client.get("/languages/70").status_code == 404  # Python 2: never offered
    for known in JUDGE0_LANGUAGES:  # what the deployment lacks is not there
        found = executor_client.get(f"/languages/{known.id}").status_code
        assert found == (200 if known.language in offered else 404)
    statuses = executor_client.get("/statuses").json()
    assert [(s["id"], s["description"]) for s in statuses] == list(STATUSES.items())
    assert executor_client.get("/about").json()["version"] == "1.13.1"


def test_an_unknown_token_is_a_404(executor_client: TestClient) -> None:
    assert executor_client.get("/submissions/no-such-token").status_code == 404
    missing = executor_client.get("/submissions/batch", params={"tokens": "a,b"})
    assert missing.status_code == 404


TEXT = st.text(max_size=20)
FIELDS = {
    "source_code": TEXT,
    "language_id": st.integers(-5, 200) | TEXT,
    "stdin": TEXT | st.none(),
    "expected_output": TEXT | st.none() | st.integers(),
    "cpu_time_limit": st.floats(allow_nan=True) | st.none() | TEXT,
    "wall_time_limit": st.floats(-1, 1000),
    "memory_limit": st.floats(-1, 1e9) | st.booleans(),
    "number_of_runs": st.integers(-2, 3),
    "redirect_stderr_to_stdout": st.booleans(),
}


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    body=st.fixed_dictionaries({}, optional=FIELDS),
    base64_encoded=st.booleans(),
    fields=st.none() | st.sampled_from(["*", "stdout,status", "nope", ""]),
)
def test_no_submission_becomes_a_5xx(
    executor_client: TestClient,
    body: dict[str, object],
    base64_encoded: bool,
    fields: str | None,
) -> None:
    # The programs the fuzz makes are short text (at most a NameError); wall_time_limit
    # is capped low so that none runs for long.
    if isinstance(body.get("wall_time_limit"), float):
        body["wall_time_limit"] = min(body["wall_time_limit"], 2.0)  # type: ignore[type-var]
    params = {"base64_encoded": str(base64_encoded).lower(), "wait": "true"}
    if fields is not None:
        params["fields"] = fields
    response = executor_client.post("/submissions", params=params, content=json.dumps(body))
    assert response.status_code < 500, response.text
    if response.status_code == 201 and fields in (None, "*"):
        assert response.json()["status"]["id"] in STATUSES


@given(
    verdict=st.sampled_from(list(Verdict)),
    exit_code=st.none() | st.integers(-300, 300),
    signal=st.none() | st.integers(0, 64),
    has_expected=st.booleans(),
)
def test_every_verdict_has_a_judge0_status(
    verdict: Verdict, exit_code: int | None, signal: int | None, has_expected: bool
) -> None:
    result = TestResult(verdict=verdict, exit_code=exit_code, signal=signal)
    status, _ = status_of(result, has_expected)
    assert status in STATUSES and status not in (1, 2)  # a finished run is never queued
    assert (status == 3) == (
        verdict is Verdict.ACCEPTED or (verdict is Verdict.WRONG_ANSWER and not has_expected)
    )
    if verdict is Verdict.RUNTIME_ERROR and signal:
        assert status in (7, 8, 9, 10, 12)
