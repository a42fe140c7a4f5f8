"""The read-only browse API the web UI reads, on PostgreSQL and SQLite, with a known seed."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.runs.browse import split_reasoning
from cobalt.orchestrator.settings import OrchestratorSettings
from tests.support.serving import serve_asgi
from tests.ui.seed import FINISHED_PASS_AT_1, Seeded, seed


@pytest.fixture
def seeded(sessions: sessionmaker[Session]) -> Seeded:
    return seed(sessions)


@pytest.fixture
def api(store_url: str, seeded: Seeded) -> Iterator[httpx.Client]:
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    with serve_asgi(create_app(settings)) as url, httpx.Client(base_url=url, timeout=30) as client:
        yield client


def test_report_from_stored_results(api: httpx.Client, seeded: Seeded) -> None:
    report = api.get(f"/v1/runs/{seeded.finished_run}/report", params={"k": [2]}).json()
    assert report["pass_at_1"] == pytest.approx(FINISHED_PASS_AT_1)
    assert report["pass_at_k"]["2"] == pytest.approx([1 / 3, 2 / 3, 2 / 3])
    assert report["mean_reward"] == pytest.approx([1 / 6, 2 / 3, 2 / 3])
    running = api.get(f"/v1/runs/{seeded.running_run}/report").json()
    assert running["mean_reward"] is None and running["turns"] == 2


def test_run_problems_table(api: httpx.Client, seeded: Seeded) -> None:
    table = api.get(f"/v1/runs/{seeded.finished_run}/problems").json()
    rows = {row["external_id"]: row for row in table["items"]}
    assert table["total"] == 3 and list(rows) == ["double", "lcb/reverse", "sum-two"]
    assert rows["sum-two"]["hidden_pass_first"] == 0.5
    assert rows["sum-two"]["outcome"] == "solved" and rows["lcb/reverse"]["outcome"] == "unsolved"
    assert rows["double"]["flagged"] == 1 and rows["double"]["difficulty"] == "medium"
    assert rows["double"]["turns"] == 3 and rows["double"]["mean_reward"] == pytest.approx(2 / 3)


def test_trajectory_detail_with_diffs(api: httpx.Client, seeded: Seeded) -> None:
    detail = api.get(f"/v1/runs/{seeded.finished_run}/problems/double").json()
    assert detail["swapped_tests"] == [1] and len(detail["trajectories"]) == 2
    turns = detail["trajectories"][1]["turns"]
    assert [t["turn_index"] for t in turns] == [0, 1, 2]
    assert turns[0]["diff"] is None
    assert "-print(2 * a + 1)" in turns[1]["diff"] and "+print(2 * a)" in turns[1]["diff"]
    assert turns[2]["diff"] == ""  # the same program again
    assert turns[1]["hacking_case_id"] == seeded.hacking_case
    assert turns[1]["reward"]["total"] == 1.0 and turns[1]["hidden_verdicts"] is not None
    assert turns[0]["reasoning"].startswith("Turn 0:") and "```python" in turns[0]["answer"]
    assert turns[1]["messages"][-1]["role"] == "user"  # the conversation rebuilt
    # An external id with a slash is one path segment of the route.
    slashed = api.get(f"/v1/runs/{seeded.finished_run}/problems/lcb/reverse")
    assert slashed.status_code == 200 and slashed.json()["external_id"] == "lcb/reverse"
    missing = api.get(f"/v1/runs/{seeded.finished_run}/problems/nope")
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"


def test_dataset_problem_pages(api: httpx.Client) -> None:
    page = api.get("/v1/datasets/demo/problems", params={"limit": 2}).json()
    assert page["total"] == 3 and len(page["items"]) == 2
    assert page["difficulties"] == ["easy", "hard", "medium"]
    hard = api.get("/v1/datasets/demo/problems", params={"difficulty": "hard"}).json()
    assert [p["external_id"] for p in hard["items"]] == ["lcb/reverse"]
    perturbed = [p["external_id"] for p in page["items"] if p["perturbed"]]
    assert perturbed == ["double"]
    assert api.get("/v1/datasets/nope/problems").status_code == 404


def test_bandit_datasets_and_contexts(api: httpx.Client) -> None:
    listed = api.get("/v1/bandit/datasets").json()
    assert listed["total"] == 1 and listed["items"][0]["contexts"] == 3
    assert listed["items"][0]["counts"]["dropped_over_token_cap"] == 1
    page = api.get("/v1/bandit/datasets/demo-contexts/contexts", params={"offset": 1}).json()
    assert page["total"] == 3 and [c["position"] for c in page["items"]] == [1, 2]
    assert page["items"][0]["problem"] == "double" and page["items"][0]["prev_best"] == 0.5


def test_hacking_cases_with_categories(api: httpx.Client, seeded: Seeded) -> None:
    cases = api.get(f"/v1/runs/{seeded.finished_run}/hacking-cases").json()
    assert cases["total"] == 1 and cases["unjudged"] == 0
    assert cases["categories"] == {"judge-model": {"1": 1}}
    verdict = cases["items"][0]["verdicts"][0]
    assert verdict["category"] == "1" and "hard-coded" in verdict["category_label"]
    other = api.get(f"/v1/runs/{seeded.finished_run}/hacking-cases", params={"category": "3"})
    assert other.json()["total"] == 0


def test_search_problems_and_responses(api: httpx.Client, store_url: str, seeded: Seeded) -> None:
    found = api.get("/v1/search", params={"q": "negative numbers"}).json()
    problems = [h for h in found["items"] if h["kind"] == "problems"]
    assert [h["external_id"] for h in problems] == ["sum-two"]
    assert "negative" in problems[0]["snippet"]
    assert found["method"] == ("postgresql-fts" if store_url.startswith("postgresql") else "like")
    responses = api.get(
        "/v1/search",
        params={"q": "edge cases", "kind": "responses", "run_id": seeded.finished_run},
    ).json()["items"]
    assert len(responses) == 18  # every turn of the run: 3 problems x 2 samples x 3 turns
    assert {h["run_id"] for h in responses} == {seeded.finished_run}
    assert {h["external_id"] for h in responses} == {"sum-two", "double", "lcb/reverse"}
    assert api.get("/v1/search", params={"q": "%%"}).status_code == 422


def test_postgresql_search_uses_the_gin_index(engine: Engine, seeded: Seeded) -> None:
    if engine.dialect.name != "postgresql":
        pytest.skip("the full-text indexes are PostgreSQL's")
    with engine.connect() as conn:
        conn.execute(text("SET enable_seqscan = off"))
        plan = "\n".join(
            conn.scalars(
                text(
                    "EXPLAIN SELECT id FROM problems WHERE to_tsvector('english'::regconfig, "
                    "statement) @@ plainto_tsquery('english'::regconfig, 'edge')"
                )
            )
        )
    assert "ix_problems_statement_fts" in plan


def test_ui_is_served_and_root_redirects(api: httpx.Client) -> None:
    root = api.get("/", follow_redirects=False)
    assert root.status_code in (302, 307) and root.headers["location"] == "/ui/"
    page = api.get("/ui/")
    assert page.status_code == 200 and '<html lang="en">' in page.text
    assert api.get("/ui/js/app.js").headers["content-type"].startswith("text/javascript")


def test_split_reasoning() -> None:
    assert split_reasoning("<think>why</think>\nanswer") == ("why", "answer")
    assert split_reasoning("plain answer") == ("", "plain answer")
    assert split_reasoning("<think>cut off") == ("cut off", "")
