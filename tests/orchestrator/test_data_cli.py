"""`cobalt data ...` end to end through typer, on the real test databases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker
from typer.testing import CliRunner

from cobalt.shared.commands import app
from cobalt.shared.contracts.runs import RunParams
from cobalt.shared.ports import free_port


def problem(external_id: str, outputs: list[str]) -> dict[str, Any]:
    return {
        "external_id": external_id,
        "statement": f"Print the answer for {external_id}.",
        "public_tests": [
            {"stdin": f"{external_id} {n}", "expected_stdout": out} for n, out in enumerate(outputs)
        ],
        "hidden_tests": [{"stdin": "h", "expected_stdout": "x"}],
    }


@pytest.fixture
def fixture_file(tmp_path: Path) -> Path:
    lines = [json.dumps(problem(f"p{i}", ["1", "2", "3", str(i)])) for i in range(6)]
    lines.append(json.dumps(problem("flat", ["5", "5", "5", "5"])))
    lines += ['{"external_id": "", "statement": "x"}', "not json", '{"statement": "no id"}']
    path = tmp_path / "problems.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def cli(
    store_url: str, sessions: sessionmaker[Session], tmp_path: Path
) -> Any:  # `sessions` empties the database first
    runner = CliRunner()
    env = {
        "COBALT_DATABASE_URL": store_url,
        "COBALT_EXECUTOR_URL": "",
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
    }

    def invoke(
        *args: str, extra_env: dict[str, str] | None = None, input: str | None = None
    ) -> Any:
        return runner.invoke(app, ["data", *args], env={**env, **(extra_env or {})}, input=input)

    return invoke


def test_import_list_show_export_perturb(cli: Any, fixture_file: Path, tmp_path: Path) -> None:
    result = cli("import", "--format", "jsonl", str(fixture_file), "--name", "toy")
    assert result.exit_code == 0, result.output
    assert "inserted" in result.stdout and "bad rows by reason" in result.stdout
    assert "not valid JSON" in result.stdout and "external_id" in result.stdout

    result = cli("import", "--format", "jsonl", str(fixture_file), "--name", "toy", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {k: report[k] for k in ("read", "inserted", "unchanged", "bad")} == {
        "read": 10,
        "inserted": 0,
        "unchanged": 7,
        "bad": 3,
    }
    reasons = {group["reason"]: group["rows"] for group in report["bad_reasons"]}
    assert sum(len(rows) for rows in reasons.values()) == 3
    assert sorted(row for rows in reasons.values() for row in rows) == [8, 9, 10]

    result = cli("list")
    assert result.exit_code == 0 and "toy" in result.stdout
    listed = json.loads(cli("list", "--json").stdout)
    assert listed["total"] == 1 and listed["items"][0]["problem_count"] == 7

    result = cli("show", "toy")
    assert result.exit_code == 0 and "p0" in result.stdout and "jsonl" in result.stdout
    shown = json.loads(cli("show", "toy", "--json").stdout)
    assert shown["problems"][:2] == ["p0", "p1"] and shown["problem_count"] == 7
    result = cli("show", "toy", "p1")
    assert result.exit_code == 0, result.output
    assert "Print the answer for p1." in result.stdout and "hidden tests (1)" in result.stdout
    one = json.loads(cli("show", "toy", "p1", "--json").stdout)
    assert one["external_id"] == "p1" and len(one["public_tests"]) == 4

    result = cli("perturb", "--name", "toy", "--out-name", "toy-p", "--seed", "4", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["dropped_ids"] == ["flat"]
    shown_p = json.loads(cli("show", "toy-p", "p2", "--json").stdout)
    assert shown_p["perturbation"]["seed"] == 4
    assert "(swapped)" in cli("show", "toy-p", "p2").stdout
    listed = json.loads(cli("list", "--json").stdout)
    perturbed = next(item for item in listed["items"] if item["name"] == "toy-p")
    assert (perturbed["variant"], perturbed["parent"], perturbed["problem_count"]) == (
        "perturbed",
        "toy",
        6,
    )

    out = tmp_path / "toy.jsonl"
    result = cli("export", "--name", "toy", "--out", str(out))
    assert result.exit_code == 0 and "exported 7 problems" in result.stdout
    result = cli("import", "--format", "jsonl", str(out), "--name", "toy-2", "--json")
    assert json.loads(result.stdout)["inserted"] == 7
    parquet = tmp_path / "toy.parquet"
    result = cli("export", "--name", "toy-p", "--out", str(parquet), "--json")
    assert json.loads(result.stdout) == {
        "dataset": "toy-p",
        "path": str(parquet),
        "format": "parquet",
        "rows": 6,
    }


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["import", "--format", "nope", "{file}", "--name", "x"], "unknown format 'nope'"),
        (["import", "--format", "jsonl", "{missing}", "--name", "x"], "no such file"),
        (["show", "nope"], "no dataset named 'nope'"),
        (["show", "toy", "nope"], "has no problem 'nope'"),
        (["export", "--name", "nope", "--out", "{tmp}/x.jsonl"], "no dataset named 'nope'"),
        (["export", "--name", "toy", "--out", "{tmp}/x.csv"], "end the name with"),
        (["perturb", "--name", "nope", "--out-name", "y"], "no dataset named 'nope'"),
        (["perturb", "--name", "toy", "--out-name", "toy"], "already exists"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    cli: Any, fixture_file: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    assert cli("import", "--format", "jsonl", str(fixture_file), "--name", "toy").exit_code == 0
    filled = [
        arg.format(file=fixture_file, missing=tmp_path / "missing.jsonl", tmp=tmp_path)
        for arg in args
    ]
    result = cli(*filled)
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and message in result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.output


def test_nothing_valid_exits_1(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": 1}\n[1]\n', encoding="utf-8")
    result = cli("import", "--format", "jsonl", str(path), "--name", "x")
    assert result.exit_code == 1
    assert "none of the 2 rows" in result.stderr and "bad rows by reason" in result.stdout


def test_unreachable_database_exits_3(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/nothing"
    result = CliRunner().invoke(app, ["data", "list"], env={"COBALT_DATABASE_URL": url})
    assert result.exit_code == 3, result.output
    assert result.stderr.startswith("error: cannot use the database")
    assert result.stderr.count("\n") == 1


def test_verify_with_unreachable_executor_exits_3(cli: Any, fixture_file: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = cli(
        "import",
        "--format",
        "jsonl",
        str(fixture_file),
        "--name",
        "v",
        "--verify",
        extra_env={"COBALT_EXECUTOR_URL": url},
    )
    assert result.exit_code == 3, result.output
    assert url in result.stderr and "not ready" in result.stderr


@pytest.mark.slow
def test_verify_starts_and_stops_a_local_executor(fixture_file: Path, tmp_path: Path) -> None:
    # The local executor's lifecycle does not depend on the database: one SQLite run.
    env = {
        "COBALT_DATABASE_URL": f"sqlite:///{tmp_path / 'verify.db'}",
        "COBALT_EXECUTOR_URL": "",
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
    }
    args = ["data", "import", "--format", "jsonl", str(fixture_file), "--name", "v", "--verify"]
    result = CliRunner().invoke(app, args, env=env)
    assert result.exit_code == 0, result.output


@pytest.mark.slow
def test_local_executor_runs_programs_and_stops() -> None:
    import socket

    from cobalt.shared.clients.local_executor import local_executor
    from cobalt.shared.contracts import ExecuteRequest, StdinTest

    with local_executor(extra_args=["--slots", "1"]) as client:
        port = int(client.base_url.rsplit(":", 1)[1])
        response = client.execute(
            ExecuteRequest(
                code="print(int(input()) * 2)", tests=[StdinTest(stdin="21", expected_stdout="42")]
            )
        )
        assert response.passed == 1
    with socket.socket() as probe:
        assert probe.connect_ex(("127.0.0.1", port)) != 0  # the process is gone


def test_delete_asks_refuses_while_runs_use_it_and_deletes(
    cli: Any, fixture_file: Path, sessions: sessionmaker[Session]
) -> None:
    from cobalt.orchestrator.store import repo_datasets, repo_runs

    assert cli("import", "--format", "jsonl", str(fixture_file), "--name", "toy").exit_code == 0
    assert cli("import", "--format", "jsonl", str(fixture_file), "--name", "used").exit_code == 0
    unconfirmed = cli("delete", "toy")  # no terminal answers the question
    assert unconfirmed.exit_code == 2 and "--yes" in unconfirmed.stderr
    declined = cli("delete", "toy", input="n\n")
    assert declined.exit_code == 2 and "not deleted" in declined.stderr
    with sessions.begin() as session:
        used = repo_datasets.get_dataset(session, name="used")
        assert used is not None
        run = repo_runs.create_run(
            session, kind="sample", dataset_id=used.id, base_url="http://m/v1", model="m",
            params=RunParams(), template_name="default", template_sha256="0" * 64,
        )  # fmt: skip
    refused = cli("delete", "used", "--yes")
    assert refused.exit_code == 2 and f"runs {run.id}" in refused.stderr
    deleted = cli("delete", "toy", input="y\n")
    assert deleted.exit_code == 0, deleted.output
    assert json.loads(cli("list", "--json").stdout)["total"] == 1
    missing = cli("delete", "toy", "--yes")
    assert missing.exit_code == 2 and "no dataset named 'toy'" in missing.stderr
