"""The read-only browse API the web UI reads, on PostgreSQL and SQLite, with a known seed:
runs, problems, trajectories, search; comparing two runs, filtering turns, a turn's tests
with the program's outputs, a training step's groups with their advantages, and a silent
training job shown as stale."""

from __future__ import annotations

import json
import os

import httpx
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.runs.browse import split_reasoning
from cobalt.orchestrator.store import repo_datasets, repo_runs
from cobalt.orchestrator.training.browse import group_advantages
from cobalt.shared.contracts.runs import RunParams
from tests.support.cli import cobalt_here
from tests.ui.seed import (
    CHANGE_COUNTS,
    FINISHED_PASS_AT_1,
    RUNTIME_ERROR,
    STEP_GROUPS,
    TRAINED_PASS_AT_1,
    TRAINED_POLICY_VERSION,
    Seeded,
)


@pytest.fixture
def api(seeded_api: httpx.Client) -> httpx.Client:
    return seeded_api


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


def test_comparing_two_runs_problem_by_problem(api: httpx.Client, seeded: Seeded) -> None:
    a, b = seeded.finished_run, seeded.trained_run
    comparison = api.get(f"/v1/runs/{a}/compare/{b}").json()
    assert comparison["counts"] == CHANGE_COUNTS
    assert comparison["report_a"]["pass_at_1"] == pytest.approx(FINISHED_PASS_AT_1)
    assert comparison["report_b"]["pass_at_1"] == pytest.approx(TRAINED_PASS_AT_1)
    assert comparison["run_b"]["policy_versions"] == [TRAINED_POLICY_VERSION]
    assert comparison["run_a"]["policy_versions"] == []
    double = next(p for p in comparison["problems"] if p["external_id"] == "double")
    assert [(t["pass_a"], t["pass_b"], t["change"]) for t in double["turns"]] == [
        (0.0, 0.0, "unchanged"),
        (1.0, 0.5, "within_noise"),  # one sample of two: not a result
        (1.0, 1.0, "unchanged"),
    ]
    low, high = double["turns"][1]["difference_interval"]
    assert low < -0.5 < 0 < high
    reverse = next(p for p in comparison["problems"] if p["external_id"] == "lcb/reverse")
    assert reverse["change"] == "fixed" and reverse["turns"][2]["difference_interval"][0] > 0
    # The Pass@1 difference per turn, with its paired bootstrap interval around it.
    differences = [b - a for a, b in zip(FINISHED_PASS_AT_1, TRAINED_PASS_AT_1, strict=True)]
    assert comparison["difference"] == pytest.approx(differences)
    for difference, (low, high) in zip(differences, comparison["difference_interval"], strict=True):
        assert low <= difference <= high and high - low > 0
    # Swapped, the same problems move the other way.
    back = api.get(f"/v1/runs/{b}/compare/{a}").json()
    assert [c["broken"] for c in back["counts"]] == [c["fixed"] for c in CHANGE_COUNTS]


def test_a_comparison_needs_two_runs_of_one_dataset(
    api: httpx.Client, seeded: Seeded, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        other = repo_datasets.create_dataset(session, name="other", source="jsonl")
        run = repo_runs.create_run(
            session, kind="sample", dataset_id=other.id, base_url="http://m/v1", model="m",
            params=RunParams(n=1), template_name="default", template_sha256="0" * 64,
            total_trajectories=0,
        )  # fmt: skip
        other_run = run.id
    mixed = api.get(f"/v1/runs/{seeded.finished_run}/compare/{other_run}")
    assert mixed.status_code == 422 and "different datasets" in mixed.json()["error"]["message"]
    same = api.get(f"/v1/runs/{seeded.finished_run}/compare/{seeded.finished_run}")
    assert same.status_code == 422
    assert api.get(f"/v1/runs/{seeded.finished_run}/compare/9999").status_code == 404


def test_filtering_turns(api: httpx.Client, seeded: Seeded) -> None:
    run = seeded.finished_run
    errors = api.get(f"/v1/runs/{run}/turns", params={"verdict": "runtime_error"}).json()
    assert errors["total"] == 6  # lcb/reverse fails everywhere: 2 samples x 3 turns
    assert {t["external_id"] for t in errors["items"]} == {"lcb/reverse"}
    turn_1 = api.get(f"/v1/runs/{run}/turns", params={"verdict": "wrong_answer", "turn": 1}).json()
    assert turn_1["total"] == 0  # every wrong answer of sum-two and double is at turn 0
    rewarded = api.get(
        f"/v1/runs/{run}/turns", params={"component": "total", "min": 0.5, "problem": "DOUB"}
    ).json()
    assert [(t["sample_index"], t["turn_index"]) for t in rewarded["items"]] == [
        (0, 1), (0, 2), (1, 1), (1, 2),
    ]  # fmt: skip
    assert all(t["reward"]["total"] == 1.0 for t in rewarded["items"])
    # A substring of the response, in any case; % and _ are literal characters.
    texts = api.get(f"/v1/runs/{run}/turns", params={"text": "A[::-1] + 2"}).json()
    assert [(t["external_id"], t["turn_index"]) for t in texts["items"]] == [
        ("lcb/reverse", 1), ("lcb/reverse", 1),
    ]  # fmt: skip
    assert api.get(f"/v1/runs/{run}/turns", params={"text": "%"}).json()["total"] == 0
    page = api.get(f"/v1/runs/{run}/turns", params={"limit": 5, "offset": 15}).json()
    assert page["total"] == 18 and len(page["items"]) == 3
    bad = api.get(f"/v1/runs/{run}/turns", params={"component": "nope", "min": 1})
    assert bad.status_code == 422 and "no reward component" in bad.json()["error"]["message"]
    assert api.get(f"/v1/runs/{run}/turns", params={"min": 1}).status_code == 422
    assert api.get(f"/v1/runs/{run}/turns", params={"tests": "secret"}).status_code == 422


def test_a_turns_tests_with_the_programs_outputs(api: httpx.Client, seeded: Seeded) -> None:
    run = seeded.finished_run
    failing = api.get(f"/v1/runs/{run}/turns", params={"problem": "lcb/reverse", "turn": 0}).json()[
        "items"
    ][0]
    tests = api.get(f"/v1/runs/{run}/turns/{failing['turn_id']}/tests").json()
    second = tests["public"][1]
    assert second["verdict"] == "runtime_error"
    assert (second["input"], second["expected"]) == ("2 2", "4")
    assert second["error"] == RUNTIME_ERROR and second["exit_code"] == 1
    assert tests["hidden"][1]["error"] == RUNTIME_ERROR  # evaluation stored them too
    passing = tests["public"][0]
    assert (passing["verdict"], passing["actual"], passing["error"]) == ("accepted", "3", "(empty)")
    elsewhere = api.get(f"/v1/runs/{seeded.running_run}/turns/{failing['turn_id']}/tests")
    assert elsewhere.status_code == 404


def test_a_steps_groups_with_rewards_and_advantages(api: httpx.Client, seeded: Seeded) -> None:
    job = seeded.training_job
    step = api.get(f"/v1/training/jobs/{job}/steps/1/groups").json()
    (group,) = step["groups"]
    assert group["problem"] == "double" and group["status"] == "consumed"
    rewards = [s["reward"] for s in group["samples"]]
    assert rewards == STEP_GROUPS[1]
    advantages = [s["advantage"] for s in group["samples"]]
    assert advantages == pytest.approx(group_advantages(STEP_GROUPS[1]))
    assert advantages[0] == pytest.approx(0.5 / (0.40824829 + 1e-6))  # (1 - 0.5) / std
    assert group["reward_mean"] == pytest.approx(0.5)
    flat = api.get(f"/v1/training/jobs/{job}/steps/2/groups").json()["groups"][0]
    assert [s["advantage"] for s in flat["samples"]] == [0.0] * 4  # equal rewards: exactly 0
    assert api.get(f"/v1/training/jobs/{job}/steps/9/groups").json()["groups"] == []
    assert api.get("/v1/training/jobs/999/steps/1/groups").status_code == 404


def test_a_shuffled_reward_jobs_groups_show_the_advantages_it_trained_on(
    api: httpx.Client, engine: Engine, seeded: Seeded
) -> None:
    """The control (`reward_shuffle_seed`): each sample keeps its own reward, and shows the
    advantage of the reward the trainer gave it after the permutation."""
    from cobalt.orchestrator.store.models import TrainingJob
    from cobalt.shared.reward_shuffle import shuffled_within_groups

    job = seeded.training_job
    group = api.get(f"/v1/training/jobs/{job}/steps/1/groups").json()["groups"][0]
    rewards = [s["reward"] for s in group["samples"]]
    seed = next(  # a seed that moves a reward: the check below then means something
        k
        for k in range(100)
        if group_advantages(shuffled_within_groups(rewards, [group["id"]] * 4, k))
        != group_advantages(rewards)
    )
    with Session(engine) as session:
        row = session.get(TrainingJob, job)
        assert row is not None
        original = row.params
        trainer = original.trainer.model_copy(update={"reward_shuffle_seed": seed})
        row.params = original.model_copy(update={"trainer": trainer})
        session.commit()
    try:
        shown = api.get(f"/v1/training/jobs/{job}/steps/1/groups").json()["groups"][0]
    finally:
        with Session(engine) as session:
            row = session.get(TrainingJob, job)
            assert row is not None
            row.params = original
            session.commit()
    assert [s["reward"] for s in shown["samples"]] == rewards == STEP_GROUPS[1]
    trained_on = shuffled_within_groups(rewards, [group["id"]] * 4, seed)
    assert [s["advantage"] for s in shown["samples"]] == pytest.approx(group_advantages(trained_on))
    assert shown["reward_mean"] == pytest.approx(group["reward_mean"])


def test_a_silent_job_is_stale(api: httpx.Client, seeded: Seeded) -> None:
    jobs = {j["id"]: j for j in api.get("/v1/training/jobs").json()["items"]}
    assert jobs[seeded.stale_job]["status"] == "running"
    assert jobs[seeded.stale_job]["liveness"] == "stale"
    assert jobs[seeded.training_job]["liveness"] == "live"
    shown = api.get(f"/v1/training/jobs/{seeded.stale_job}").json()
    assert shown["liveness"] == "stale" and shown["last_activity_at"] is not None
    api.post(f"/v1/training/jobs/{seeded.stale_job}/stop")
    assert api.get(f"/v1/training/jobs/{seeded.stale_job}").json()["liveness"] == "ended"


def test_comparing_two_runs_at_the_terminal(store_url: str, seeded: Seeded) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    # boxed as at a terminal (piped, the table would be tab-separated)
    env |= {"COBALT_DATABASE_URL": store_url, "COLUMNS": "160", "COBALT_TABLE_FORMAT": "table"}
    a, b = str(seeded.finished_run), str(seeded.trained_run)
    shown = cobalt_here(env, "run", "compare", a, b)
    assert shown.returncode == 0, shown.stderr
    rows = [line.split("│")[1:-1] for line in shown.stdout.splitlines() if line.startswith("│")]
    cells = [[cell.strip() for cell in row] for row in rows]
    changes = ("fixed", "broken", "within_noise", "unchanged", "unevaluated")
    assert [[row[0], row[1].split()[0], row[2].split()[0], *row[5:]] for row in cells] == [
        [str(t), f"{FINISHED_PASS_AT_1[t]:.3f}", f"{TRAINED_PASS_AT_1[t]:.3f}",
         *(str(counts[k]) for k in changes)]
        for t, counts in enumerate(CHANGE_COUNTS)
    ]  # fmt: skip
    # three problems: the interval is shown, but no verdict is read off it
    assert {row[4] for row in cells} == {"too few (3)"}
    assert all(row[1].count("[") == row[2].count("[") == row[3].count("[") == 1 for row in cells)
    assert "fixed at the last turn: lcb/reverse" in shown.stdout
    assert "broken at the last turn: sum-two" in shown.stdout
    as_json = json.loads(cobalt_here(env, "run", "compare", a, b, "--json").stdout)
    assert as_json["counts"] == CHANGE_COUNTS
    assert as_json["paired_problems"] == [3] * len(CHANGE_COUNTS)
    assert as_json["verdict"] == ["too_few_problems"] * len(CHANGE_COUNTS)
    listed = cobalt_here(env, "run", "list").stdout
    assert "v3" in listed  # the trained run's policy version tells it from the others
    other = cobalt_here(env, "run", "compare", a, a)
    assert other.returncode == 2 and "not with itself" in other.stderr


def test_an_unevaluated_run_is_null_and_not_compared(
    api: httpx.Client, store_url: str, seeded: Seeded, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        session.execute(
            text("UPDATE turns SET hidden_passed = NULL WHERE run_id = :run"),
            {"run": seeded.trained_run},
        )
    report = api.get(f"/v1/runs/{seeded.trained_run}/report").json()
    assert report["problems"] == 0
    assert report["pass_at_1"] is None and report["public_pass_at_1"] is None
    assert report["pass_at_1_interval"] is None
    assert report["unevaluated"] == f"cobalt run evaluate {seeded.trained_run}"
    evaluated = api.get(f"/v1/runs/{seeded.finished_run}/report").json()
    assert evaluated["unevaluated"] is None
    for (low, high), rate in zip(evaluated["pass_at_1_interval"], FINISHED_PASS_AT_1, strict=True):
        assert 0 <= low <= rate <= high <= 1
    comparison = api.get(f"/v1/runs/{seeded.finished_run}/compare/{seeded.trained_run}").json()
    assert comparison["difference"] == [None, None, None]
    assert {c["unevaluated"] for c in comparison["counts"]} == {3}
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    env |= {"COBALT_DATABASE_URL": store_url, "COLUMNS": "160"}
    shown = cobalt_here(env, "run", "compare", str(seeded.finished_run), str(seeded.trained_run))
    assert shown.returncode == 1 and "0.000" not in shown.stdout
    assert f"`cobalt run evaluate {seeded.trained_run}` measures them" in shown.stderr
