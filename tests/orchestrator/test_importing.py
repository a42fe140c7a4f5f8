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


def _import(sessions: sessionmaker[Session], path: Path) -> object:
    return import_file(
        sessions=sessions, name="toy", fmt="jsonl", path=path, options=ImportOptions()
    )


def test_an_edited_problem_is_reported_changed_and_nothing_is_imported(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    first = write(tmp_path / "v1.jsonl", json.dumps(GOOD), json.dumps({**GOOD, "external_id": "b"}))
    _import(sessions, first)
    edited_tests = {**GOOD, "hidden_tests": [{"stdin": "2 2", "expected_stdout": "5"}]}
    new_problem = {**GOOD, "external_id": "c"}
    second = write(
        tmp_path / "v2.jsonl",
        json.dumps(edited_tests),
        json.dumps({**GOOD, "external_id": "b"}),
        json.dumps(new_problem),
    )
    with pytest.raises(Conflict, match=r"1 problems of dataset 'toy' differ.*: sum;.*--name"):
        _import(sessions, second)
    with sessions.begin() as session:
        dataset = repo_datasets.get_dataset(session, name="toy")
        assert dataset is not None
        stored = repo_datasets.get_problem(session, dataset_id=dataset.id, external_id="sum")
        assert stored is not None and stored.hidden_tests == GOOD["hidden_tests"]  # kept
        assert repo_datasets.count_problems(session, dataset_id=dataset.id) == 2  # no "c"


def test_an_id_twice_in_one_file_is_refused_naming_it(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    path = write(
        tmp_path / "dup.jsonl",
        json.dumps(GOOD),
        json.dumps({**GOOD, "external_id": "other"}),
        json.dumps({**GOOD, "statement": "Another statement with the same id."}),
    )
    with pytest.raises(
        InvalidInput, match=r"1 external ids occur more than once.*sum \(rows 1, 3\)"
    ):
        _import(sessions, path)
    with sessions.begin() as session:
        assert repo_datasets.get_dataset(session, name="toy") is None
