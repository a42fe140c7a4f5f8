"""Exporting datasets to JSONL and Parquet, reading them back, and the row schema file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.datasets.export import export_dataset, export_format
from cobalt.orchestrator.datasets.importing import ImportOptions, import_file
from cobalt.orchestrator.datasets.perturb import perturb_dataset
from cobalt.orchestrator.store import repo_datasets
from cobalt.shared.contracts import ProblemRow
from cobalt.shared.errors import InvalidInput, NotFound

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "schemas" / "problem.schema.json"


def rows() -> list[dict[str, Any]]:
    stdin = [
        {
            "external_id": f"s{i}",
            "statement": f"Read n and print n + {i}. Ünïcode ✓",
            "test_style": "stdin",
            "public_tests": [{"stdin": str(n), "expected_stdout": str(n + i)} for n in range(4)],
            "hidden_tests": [{"stdin": str(n), "expected_stdout": f"{n + i}\n"} for n in range(16)],
            "difficulty": "EASY" if i % 2 else None,
            "source_metadata": {"url": f"https://example.org/{i}", "tags": ["math"]},
        }
        for i in range(7)
    ]
    call = {
        "external_id": "c0",
        "statement": "Return the pair.",
        "starter_code": "def f(a, b):\n    pass\n",
        "test_style": "call",
        "fn_name": "f",
        "public_tests": [
            {"fn_name": "f", "args": [1, [2]], "kwargs": {}, "expected": [1, [2]]},
            {"fn_name": "f", "args": [3, None], "kwargs": {"x": 1.5}, "expected": {"k": [3]}},
        ],
        "hidden_tests": [{"check": "assert f(1, 2) == [1, 2]"}],
    }
    return [*stdin, call]


@pytest.fixture
def source_file(tmp_path: Path) -> Path:
    path = tmp_path / "source.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows()), encoding="utf-8")
    return path


@pytest.fixture
def imported(sessions: sessionmaker[Session], source_file: Path) -> str:
    report = import_file(
        sessions=sessions, name="toy", fmt="jsonl", path=source_file, options=ImportOptions()
    )
    assert report.inserted == len(rows()) and not report.bad
    return "toy"


def stored_rows(sessions: sessionmaker[Session], name: str) -> list[dict[str, Any]]:
    """A dataset's problems as ProblemRow dicts, by external id."""
    with sessions.begin() as session:
        dataset = repo_datasets.get_dataset(session, name=name)
        assert dataset is not None
        problems = repo_datasets.iter_problems(session, dataset_id=dataset.id)
        found = [
            ProblemRow.model_validate(
                {field: getattr(p, field) for field in ProblemRow.model_fields}
            ).model_dump(mode="json")
            for p in problems
        ]
    return sorted(found, key=lambda row: row["external_id"])


def expected_rows() -> list[dict[str, Any]]:
    validated = [ProblemRow.model_validate(row).model_dump(mode="json") for row in rows()]
    return sorted(validated, key=lambda row: row["external_id"])


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_jsonl_round_trip(
    sessions: sessionmaker[Session], imported: str, tmp_path: Path, suffix: str
) -> None:
    out = tmp_path / f"export{suffix}"
    report = export_dataset(sessions=sessions, name=imported, out=out, batch_size=3)
    assert (report.format, report.rows) == ("jsonl", len(rows()))
    opener = gzip.open if suffix.endswith(".gz") else open
    with opener(out, "rt", encoding="utf-8") as lines:
        exported = [json.loads(line) for line in lines]
    # Every line is a valid ProblemRow, in id (= import) order.
    assert [row["external_id"] for row in exported] == [row["external_id"] for row in rows()]
    for row in exported:
        ProblemRow.model_validate(row)
    again = import_file(
        sessions=sessions, name="toy-again", fmt="jsonl", path=out, options=ImportOptions()
    )
    assert (again.inserted, again.bad) == (len(rows()), [])
    assert stored_rows(sessions, "toy-again") == stored_rows(sessions, imported)
    assert stored_rows(sessions, imported) == expected_rows()


def test_jsonl_loads_with_hf_datasets(
    sessions: sessionmaker[Session], imported: str, tmp_path: Path
) -> None:
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "export.jsonl"
    export_dataset(sessions=sessions, name=imported, out=out)
    loaded = datasets.load_dataset(
        "json", data_files=str(out), split="train", cache_dir=str(tmp_path / "hf")
    )
    assert loaded.num_rows == len(rows())
    assert loaded[0]["external_id"] == "s0"
    assert loaded[0]["public_tests"][1] == {"stdin": "1", "expected_stdout": "1"}


def test_parquet_is_flat_and_loads_everywhere(
    sessions: sessionmaker[Session], imported: str, tmp_path: Path
) -> None:
    out = tmp_path / "export.parquet"
    report = export_dataset(sessions=sessions, name=imported, out=out, batch_size=3)
    assert (report.format, report.rows) == ("parquet", len(rows()))
    parquet = pq.ParquetFile(out)
    assert parquet.metadata.num_row_groups == 3  # streamed: one row group per batch
    table = parquet.read()
    assert all(str(field.type) == "string" for field in table.schema)  # flat
    assert set(table.column_names) == {*ProblemRow.model_fields, "dataset", "perturbation"}
    by_id = {row["external_id"]: row for row in table.to_pylist()}
    for original in expected_rows():
        row = by_id[original["external_id"]]
        assert row["dataset"] == imported and row["perturbation"] is None
        for column in ("public_tests", "hidden_tests", "source_metadata"):
            row[column] = json.loads(row[column])
        del row["dataset"], row["perturbation"]
        assert row == original

    datasets = pytest.importorskip("datasets")
    loaded = datasets.load_dataset(
        "parquet", data_files=str(out), split="train", cache_dir=str(tmp_path / "hf")
    )
    assert loaded.num_rows == len(rows())
    first = loaded[0]
    assert first["dataset"] == imported
    assert json.loads(first["hidden_tests"])[0] == {"stdin": "0", "expected_stdout": "0\n"}


def test_parquet_keeps_the_perturbation_record(
    sessions: sessionmaker[Session], imported: str, tmp_path: Path
) -> None:
    perturb_dataset(sessions=sessions, source=imported, target="toy-p", seed=1)
    out = tmp_path / "p.parquet"
    export_dataset(sessions=sessions, name="toy-p", out=out)
    records = pq.read_table(out).to_pylist()
    assert records and all(json.loads(r["perturbation"])["seed"] == 1 for r in records)


def test_empty_dataset_exports_empty_files(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    with sessions.begin() as session:
        repo_datasets.create_dataset(session, name="empty", source="jsonl")
    assert export_dataset(sessions=sessions, name="empty", out=tmp_path / "e.jsonl").rows == 0
    assert (tmp_path / "e.jsonl").read_bytes() == b""
    assert export_dataset(sessions=sessions, name="empty", out=tmp_path / "e.parquet").rows == 0
    assert pq.read_table(tmp_path / "e.parquet").num_rows == 0


def test_bad_requests_leave_no_file(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no dataset"):
        export_dataset(sessions=sessions, name="missing", out=tmp_path / "x.jsonl")
    with pytest.raises(InvalidInput, match="end the name with"):
        export_dataset(sessions=sessions, name="missing", out=tmp_path / "x.csv")
    with pytest.raises(InvalidInput, match="does not exist"):
        export_dataset(sessions=sessions, name="missing", out=tmp_path / "no" / "x.jsonl")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "fmt"),
    [("a.jsonl", "jsonl"), ("A.JSONL.GZ", "jsonl"), ("a.parquet", "parquet"), (".jsonl", None)],
)
def test_export_format(name: str, fmt: str | None) -> None:
    if fmt is None:
        with pytest.raises(InvalidInput):
            export_format(Path(name))
    else:
        assert export_format(Path(name)) == fmt


def test_schema_file_matches_the_model() -> None:
    """docs/schemas/problem.schema.json is generated; regenerate it when this fails:

    .venv/bin/python -c "import json; from cobalt.shared.contracts import ProblemRow;
    print(json.dumps(ProblemRow.model_json_schema(), indent=2, ensure_ascii=False))"
    > docs/schemas/problem.schema.json
    """
    assert json.loads(SCHEMA_FILE.read_text(encoding="utf-8")) == ProblemRow.model_json_schema()


def test_parquet_export_imports_back_with_the_jsonl_format(
    sessions: sessionmaker[Session], imported: str, tmp_path: Path
) -> None:
    out = tmp_path / "export.parquet"
    export_dataset(sessions=sessions, name=imported, out=out)
    again = import_file(
        sessions=sessions, name="from-parquet", fmt="jsonl", path=out, options=ImportOptions()
    )
    assert (again.inserted, again.bad) == (len(rows()), [])
    assert stored_rows(sessions, "from-parquet") == stored_rows(sessions, imported)
