"""The import flow's guarantees, whatever the format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.datasets.importing import ImportOptions, import_file
from cobalt.orchestrator.store import repo_datasets
from cobalt.shared.errors import Conflict, InvalidInput

GOOD = {
    "external_id": "sum",
    "statement": "Read two numbers, print their sum.",
    "public_tests": [{"stdin": "1 2", "expected_stdout": "3"}],
    "hidden_tests": [{"stdin": "2 2", "expected_stdout": "4"}],
}


def write(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def test_missing_file_is_invalid_input(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no such file"):
        import_file(
            sessions=sessions, name="x", fmt="jsonl", path=tmp_path / "nope.jsonl",
            options=ImportOptions(),
        )  # fmt: skip


def test_bad_rows_are_reported_and_skipped_never_abort(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    path = write(
        tmp_path / "rows.jsonl",
        json.dumps(GOOD),
        "{not json",
        json.dumps({**GOOD, "external_id": "no-statement", "statement": ""}),
        json.dumps([1, 2]),
        json.dumps({**GOOD, "external_id": "second"}),
    )
    report = import_file(
        sessions=sessions, name="toy", fmt="jsonl", path=path, options=ImportOptions()
    )
    assert (report.read, report.inserted, report.unchanged) == (5, 2, 0)
    assert [bad.row for bad in report.bad] == [2, 3, 4]
    assert "statement" in report.bad[1].reason
    again = import_file(
        sessions=sessions, name="toy", fmt="jsonl", path=path, options=ImportOptions()
    )
    assert (again.inserted, again.unchanged) == (0, 2)


def test_an_import_with_nothing_usable_leaves_no_dataset(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    path = write(tmp_path / "wrong.jsonl", json.dumps({"question": "not our format"}))
    report = import_file(
        sessions=sessions, name="toy", fmt="jsonl", path=path, options=ImportOptions()
    )
    assert report.inserted == 0 and len(report.bad) == 1
    with sessions.begin() as session:
        assert repo_datasets.get_dataset(session, name="toy") is None


def test_a_dataset_keeps_its_format(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    path = write(tmp_path / "rows.jsonl", json.dumps(GOOD))
    import_file(sessions=sessions, name="toy", fmt="jsonl", path=path, options=ImportOptions())
    with pytest.raises(Conflict, match="choose another --name"):
        import_file(sessions=sessions, name="toy", fmt="taco", path=path, options=ImportOptions())
