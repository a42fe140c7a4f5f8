"""Results to take away, on PostgreSQL and SQLite with the UI's known seed: run labels
(and their migration), the multi-run table, CSV and JSON exports through the API and the
CLI, the terminal's text views, and the store's start-up guards."""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect, select, text
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store.db import (
    alembic_config,
    head_revision,
    make_engine,
    make_sessionmaker,
    upgrade_database,
)
from cobalt.orchestrator.store.models import Run
from cobalt.shared.contracts.runs import RunParams
from tests.support.cli import cobalt_here
from tests.support.databases import empty_database
from tests.ui.seed import (
    FINISHED_PASS_AT_1,
    TRAINED_PASS_AT_1,
    TRAINING_METRICS,
    Seeded,
)


@pytest.fixture
def api(seeded_api: httpx.Client) -> httpx.Client:
    return seeded_api


@pytest.fixture
def env(store_url: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    return clean | {"COBALT_DATABASE_URL": store_url, "COLUMNS": "200"}


def _csv(body: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(body)))


def test_head_revision_is_alembics(store_url: str) -> None:
    script = ScriptDirectory.from_config(alembic_config(store_url))
    assert head_revision() == script.get_current_head() == "0015"


@pytest.fixture(params=["postgresql", "sqlite"])
def empty_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of its own, with no schema: migrations run on it from the start."""
    with empty_database(request.param, tmp_path) as url:
        yield url


def test_the_labels_migration_keeps_existing_runs(empty_url: str) -> None:
    """Up from 0010 with a run stored, and back down, on both databases."""
    from alembic import command

    upgrade_database(empty_url, "0010")
    engine = make_engine(empty_url)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO datasets (name, source, variant, provenance) "
                "VALUES ('d', 'jsonl', '', '{}')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO runs (kind, status, dataset_id, base_url, model, params, "
                "template_name, template_sha256, total_trajectories) SELECT 'sample', "
                "'finished', id, 'u', 'm', '{}', 't', 'x', 0 FROM datasets"
            )
        )
    upgrade_database(empty_url)
    with make_sessionmaker(engine)() as session:
        run = session.scalars(select(Run)).one()
        assert (run.name, run.tags, run.notes) == (None, [], None)
    command.downgrade(alembic_config(empty_url), "0010")
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM runs")).scalar() == 1
        columns = {c["name"] for c in inspect(conn).get_columns("runs")}
    assert not columns & {"name", "tags", "notes"}
    engine.dispose()


def test_labels_through_the_api_and_the_cli(
    api: httpx.Client, seeded: Seeded, env: dict[str, str]
) -> None:
    run = seeded.finished_run
    labelled = api.patch(
        f"/v1/runs/{run}", json={"name": "baseline", "tags": ["before", "qwen"], "notes": "n=2"}
    ).json()
    assert (labelled["name"], labelled["tags"], labelled["notes"]) == (
        "baseline", ["before", "qwen"], "n=2",
    )  # fmt: skip
    bad = api.patch(f"/v1/runs/{run}", json={"tags": ["two words"]})
    assert bad.status_code == 422
    assert api.patch(f"/v1/runs/{run}", json={"colour": "red"}).status_code == 422
    assert api.patch("/v1/runs/9999", json={"name": "x"}).status_code == 404
    shown = cobalt_here(env, "run", "label", str(run), "--tag", "kept", "--untag", "qwen")
    assert shown.returncode == 0 and "baseline, #before #kept" in shown.stdout
    cleared = cobalt_here(env, "run", "label", str(run), "--name", "", "--json")
    assert json.loads(cleared.stdout)["name"] is None
    refused = cobalt_here(env, "run", "label", str(run), "--tag", "a b")
    assert refused.returncode == 2 and refused.stderr.startswith("error: --tag")
    assert "#before #kept" in cobalt_here(env, "run", "show", str(run)).stdout
    cobalt_here(env, "run", "label", str(run), "--name", "baseline")
    assert "baseline #before #kept" in cobalt_here(env, "run", "list").stdout


def test_the_multi_run_table(api: httpx.Client, seeded: Seeded) -> None:
    a, b = seeded.finished_run, seeded.trained_run
    table = api.get("/v1/tables/runs", params={"run": [b, a]}).json()
    assert [row["run"]["id"] for row in table["rows"]] == [b, a]
    assert table["difficulties"] == ["easy", "medium", "hard"] and table["datasets"] == ["demo"]
    trained, finished = table["rows"]
    assert trained["pass_at_1_first"] == pytest.approx(TRAINED_PASS_AT_1[0])
    assert finished["pass_at_1_last"] == pytest.approx(FINISHED_PASS_AT_1[-1])
    for row in table["rows"]:
        low, high = row["pass_at_1_last_interval"]
        assert low <= row["pass_at_1_last"] <= high
    # Per difficulty, at the last turn: hard is lcb/reverse, 0/2 before and 2/2 after.
    hard = finished["by_difficulty"]["hard"]
    assert (hard["problems"], hard["pass_at_1"]) == (1, 0.0)
    assert hard["interval"] == pytest.approx([0.0, 0.6576], abs=1e-4)  # Wilson, 0 of 2
    assert trained["by_difficulty"]["hard"]["pass_at_1"] == 1.0
    exported = api.get("/v1/exports/tables/runs", params={"run": [b, a], "format": "csv"})
    assert exported.headers["content-type"].startswith("text/csv")
    assert 'filename="runs-table.csv"' in exported.headers["content-disposition"]
    rows = _csv(exported.text)
    assert [r["run_id"] for r in rows] == [str(b), str(a)]
    assert float(rows[1]["hard_pass_at_1"]) == 0.0 and rows[1]["hard_problems"] == "1"
    assert float(rows[0]["pass_at_1_last_low"]) == pytest.approx(
        trained["pass_at_1_last_interval"][0]
    )
    assert api.get("/v1/tables/runs", params={"run": [a, a]}).status_code == 422
    assert api.get("/v1/tables/runs").status_code == 422
    assert api.get("/v1/tables/runs", params={"run": [a, 9999]}).status_code == 404


def test_exports_of_problems_comparisons_and_job_metrics(api: httpx.Client, seeded: Seeded) -> None:
    a, b = seeded.finished_run, seeded.trained_run
    problems = _csv(api.get(f"/v1/exports/runs/{a}/problems").text)
    by_id = {row["problem"]: row for row in problems}
    assert set(by_id) == {"sum-two", "double", "lcb/reverse"}
    assert float(by_id["sum-two"]["hidden_pass_first"]) == 0.5
    assert 0 < float(by_id["sum-two"]["hidden_pass_first_low"]) < 0.5
    as_json = api.get(f"/v1/exports/runs/{a}/problems", params={"format": "json"}).json()
    assert as_json["total"] == 3
    compared = _csv(api.get(f"/v1/exports/runs/{a}/compare/{b}").text)
    cell = next(r for r in compared if r["problem"] == "sum-two" and r["turn"] == "2")
    assert (cell["pass_a"], cell["pass_b"], cell["change"]) == ("1.0", "0.0", "broken")
    summary = [r for r in compared if r["problem"] == ""]
    assert [float(r["difference"]) for r in summary] == pytest.approx(
        [t - f for f, t in zip(FINISHED_PASS_AT_1, TRAINED_PASS_AT_1, strict=True)]
    )
    metrics = _csv(api.get(f"/v1/exports/training/jobs/{seeded.training_job}/metrics").text)
    assert [float(r["reward_mean"]) for r in metrics] == [
        m["reward_mean"] for m in TRAINING_METRICS
    ]
    assert [r["step"] for r in metrics] == ["1", "2", "3"]
    assert api.get(f"/v1/exports/runs/{a}/problems", params={"format": "xls"}).status_code == 422


def test_nothing_measured_is_an_empty_cell_not_zero(
    api: httpx.Client, seeded: Seeded, sessions: sessionmaker[Session], env: dict[str, str]
) -> None:
    with sessions.begin() as session:
        session.execute(
            text("UPDATE turns SET hidden_passed = NULL WHERE run_id = :run"),
            {"run": seeded.trained_run},
        )
    rows = _csv(api.get("/v1/exports/tables/runs", params={"run": [seeded.trained_run]}).text)
    assert rows[0]["pass_at_1_last"] == "" and rows[0]["problems"] == "0"
    table = cobalt_here(env, "run", "table", str(seeded.finished_run), str(seeded.trained_run))
    assert table.returncode == 1
    assert f"`cobalt run evaluate {seeded.trained_run}` measures it" in table.stderr


def test_cli_exports_and_text_views(seeded: Seeded, env: dict[str, str], tmp_path: Path) -> None:
    a, b = str(seeded.finished_run), str(seeded.trained_run)
    out = tmp_path / "problems.csv"
    written = cobalt_here(env, "run", "export", a, "--out", str(out))
    assert written.returncode == 0, written.stderr
    assert {row["problem"] for row in _csv(out.read_text())} == {"sum-two", "double", "lcb/reverse"}
    as_json = cobalt_here(env, "run", "export", a, "--format", "json")
    assert json.loads(as_json.stdout)["run_id"] == int(a)
    missing = cobalt_here(env, "run", "export", a, "--out", str(tmp_path / "nope" / "x.csv"))
    assert missing.returncode == 2 and "does not exist" in missing.stderr
    table = cobalt_here(env, "run", "table", a, b, "--out", str(tmp_path / "t.json"))
    assert table.returncode == 0
    assert [r["run"]["id"] for r in json.loads((tmp_path / "t.json").read_text())["rows"]] == [
        int(a), int(b),
    ]  # fmt: skip
    shown = cobalt_here(env, "run", "table", a, b)
    assert "0.667 [" in shown.stdout and "hard (last)" in shown.stdout
    compared = cobalt_here(env, "run", "compare", a, b, "--out", str(tmp_path / "c.csv"))
    assert compared.returncode == 0 and (tmp_path / "c.csv").read_text().startswith("run_a,")
    metrics = cobalt_here(env, "train", "metrics", str(seeded.training_job))
    assert metrics.stdout.splitlines()[0].startswith("job_id,step,policy_version")
    problems = cobalt_here(env, "run", "show", a, "--problems")
    assert "lcb/reverse" in problems.stdout and "0.500 [" in problems.stdout
    trajectory = cobalt_here(env, "run", "trajectory", a, "double", "--sample", "0")
    assert trajectory.returncode == 0, trajectory.stderr
    text_view = trajectory.stdout
    assert "turn 0" in text_view and "hidden tests: fail (1/2), 2: wrong_answer" in text_view
    assert "Test 2 failed: expected 3, got 4." in text_view  # the feedback the model saw
    assert "-print(2 * a + 1)\n+print(2 * a)" in text_view  # turn 1's diff
    no_sample = cobalt_here(env, "run", "trajectory", a, "double", "--sample", "7")
    assert no_sample.returncode == 2 and "has samples 0, 1" in no_sample.stderr
    unknown = cobalt_here(env, "run", "trajectory", a, "nope")
    assert unknown.returncode == 2


def test_a_sqlite_path_in_a_missing_folder_is_refused(tmp_path: Path) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    missing = tmp_path / "typo" / "cobalt.db"
    for args in (("run", "list"), ("data", "list"), ("run", "table", "1")):
        shown = cobalt_here(clean | {"COBALT_DATABASE_URL": f"sqlite:///{missing}"}, *args)
        assert shown.returncode == 2 and len(shown.stderr.strip().splitlines()) == 1
        assert "folder that does not exist" in shown.stderr
    assert not missing.parent.exists()
    fresh = tmp_path / "cobalt.db"  # an existing folder: a new store, as before
    listed = cobalt_here(clean | {"COBALT_DATABASE_URL": f"sqlite:///{fresh}"}, "run", "list")
    assert listed.returncode == 0 and fresh.exists()


def test_trackers_log_nothing_for_a_run_not_evaluated(tmp_path: Path) -> None:
    from cobalt.orchestrator.runs.plots import plot_pass_at_1
    from cobalt.orchestrator.runs.tracking import per_turn_metrics, summary_metrics
    from cobalt.shared.contracts.runs import EvaluationReport

    report = EvaluationReport(
        run_id=4, problems=0, samples=2, turns=3, pass_at_1=None, pass_at_k={},
        public_pass_at_1=None, failed_trajectories=0, unevaluated="cobalt run evaluate 4",
    )  # fmt: skip
    assert per_turn_metrics(report) == []
    assert not any("pass_at_1" in key for key in summary_metrics(report))
    assert plot_pass_at_1([report], tmp_path / "p.png").stat().st_size > 0  # no line, no 0


def test_a_problem_with_no_turn_yet_has_no_rates(
    api: httpx.Client, seeded: Seeded, sessions: sessionmaker[Session]
) -> None:
    from cobalt.orchestrator.store import repo_runs, repo_trajectories
    from cobalt.orchestrator.store.models import Problem

    with sessions.begin() as session:
        problem = session.scalars(select(Problem).where(Problem.external_id == "double")).one()
        run = repo_runs.create_run(
            session, kind="sample", dataset_id=problem.dataset_id, base_url="http://m/v1",
            model="m", params=RunParams(n=2), template_name="default", template_sha256="0" * 64,
            total_trajectories=2,
        )  # fmt: skip
        repo_trajectories.ensure_trajectories(
            session, run_id=run.id, keys=[(problem.id, 0), (problem.id, 1)]
        )
        run_id = run.id
    (row,) = api.get(f"/v1/runs/{run_id}/problems").json()["items"]
    assert row["public_pass_last"] is None and row["hidden_pass_last"] is None
    assert row["outcome"] == "unevaluated"
    (exported,) = _csv(api.get(f"/v1/exports/runs/{run_id}/problems").text)
    assert exported["public_pass_last"] == "" and exported["hidden_pass_first"] == ""


def test_a_report_without_intervals_skips_the_bootstrap(api: httpx.Client, seeded: Seeded) -> None:
    with_them = api.get(f"/v1/runs/{seeded.finished_run}/report").json()
    without = api.get(
        f"/v1/runs/{seeded.finished_run}/report", params={"intervals": "false"}
    ).json()
    assert without["pass_at_1_interval"] is None and with_them["pass_at_1_interval"] is not None
    assert without["pass_at_1"] == with_them["pass_at_1"]
