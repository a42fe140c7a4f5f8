"""TACO and TACO-Cobalt imports end to end: fixture files in the real layouts, through
`import_file`, on PostgreSQL and SQLite; verification on the real sandboxed executor."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.datasets.importing import ImportOptions, ImportReport, import_file
from cobalt.orchestrator.store import repo_datasets
from cobalt.shared.clients import ExecutorClient
from cobalt.shared.contracts import CallTest, ExecuteRequest
from cobalt.shared.errors import InvalidInput
from tests.orchestrator.helpers import Problems, stored_problems
from tests.orchestrator.taco_fixtures import (
    LENGTHS,
    SCALE_SOLUTION,
    SUM_LIST_QUESTION,
    TACO_COBALT_DROPS,
    TACO_COBALT_KEPT,
    TACO_COBALT_ROWS,
    TACO_DROPS,
    TACO_KEPT,
    TACO_ROWS,
    TACO_UNSOLVABLE,
    hashed_id,
    write_taco,
    write_taco_cobalt,
)


def _import(
    sessions: sessionmaker[Session],
    path: Path,
    *,
    fmt: str = "taco",
    name: str = "taco",
    **options: Any,
) -> ImportReport:
    return import_file(
        sessions=sessions, name=name, fmt=fmt, path=path, options=ImportOptions(**options)
    )


def _problems(sessions: sessionmaker[Session], name: str = "taco") -> Problems:
    return stored_problems(sessions, name)


@pytest.fixture
def executor(executor_url: str) -> Iterator[ExecutorClient]:
    """The real sandboxed executor, over HTTP, behind the typed client."""
    with ExecutorClient(base_url=executor_url) as client:
        yield client


def _rules(report: ImportReport) -> Counter[str]:
    return Counter(bad.reason.split(":")[0] for bad in report.bad)


def _key(test: dict[str, Any]) -> str:
    return repr(sorted(test.items()))


# --- raw TACO --------------------------------------------------------------------------


@pytest.mark.parametrize("file_format", ["jsonl", "parquet"])
def test_taco_counts_per_rule(
    sessions: sessionmaker[Session], tmp_path: Path, file_format: str
) -> None:
    report = _import(sessions, write_taco(tmp_path, file_format))
    assert (report.read, report.inserted, report.unchanged) == (TACO_ROWS, len(TACO_KEPT), 0)
    assert _rules(report) == TACO_DROPS
    assert set(_problems(sessions)) == TACO_KEPT
    by_id = {bad.external_id: bad for bad in report.bad}
    assert by_id["taco-too-few"].reason == "too_few_tests: 7 tests, need at least 8"
    assert by_id["taco-unequal"].reason == "unequal_tests: 8 inputs but 9 outputs"
    assert by_id["taco-no-question"].reason == "malformed: missing column 'question'"
    assert by_id["taco-bad-json"].reason.startswith("malformed: column 'input_output' is not")
    assert by_id["taco-short"].row == 12


def test_taco_keeps_5_shortest_and_15_longest(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    _import(sessions, write_taco(tmp_path))
    many = _problems(sessions)["taco-many"]
    tests = many["public"] + many["hidden"]
    assert sorted(len(t["stdin"]) for t in tests) == [*range(1, 6), *range(11, 26)]
    assert all(t["expected_stdout"] == str(len(t["stdin"])) for t in tests)
    assert many["meta"]["tests_before"] == len(LENGTHS) == 25
    assert many["meta"]["tests_after"] == 20
    assert _problems(sessions)["taco-sum"]["meta"] == {
        "url": "https://example.com/problems/sum",
        "source": "codeforces",
        "tests_before": 10,
        "tests_after": 10,
    }


def test_taco_split_is_deterministic_per_seed(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    path = write_taco(tmp_path)
    splits: dict[str, Problems] = {}
    for name, seed in (("seed0", 0), ("seed0-again", 0), ("seed1", 1)):
        _import(sessions, path, name=name, seed=seed)
        splits[name] = _problems(sessions, name)

    def public(name: str) -> dict[str, list[Any]]:
        return {pid: p["public"] for pid, p in splits[name].items()}

    assert public("seed0") == public("seed0-again")
    assert public("seed0") != public("seed1")
    for pid, problem in splits["seed0"].items():
        other = splits["seed1"][pid]
        assert len(problem["public"]) == 4
        everything = sorted(map(_key, problem["public"] + problem["hidden"]))
        assert everything == sorted(map(_key, other["public"] + other["hidden"]))

    _import(sessions, path, name="two-public", public_tests=2)
    assert all(len(p["public"]) == 2 for p in _problems(sessions, "two-public").values())


def test_taco_list_valued_tests_become_text(
    sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    _import(sessions, write_taco(tmp_path))
    problem = _problems(sessions)[hashed_id(SUM_LIST_QUESTION)]
    tests = problem["public"] + problem["hidden"]
    assert problem["test_style"] == "stdin" and problem["fn_name"] is None
    assert {"stdin": "3\n1 2 3", "expected_stdout": "6\n3"} in tests
    assert all(isinstance(t["stdin"], str) and "\n" in t["stdin"] for t in tests)


def test_taco_call_tests(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    _import(sessions, write_taco(tmp_path))
    problems = _problems(sessions)
    add = problems["taco-add"]
    assert (add["test_style"], add["fn_name"]) == ("call", "add")
    assert add["starter_code"] == "def add(a, b):\n    "
    assert add["meta"]["call_outputs_unwrapped"] is True
    assert {"fn_name": "add", "args": [3, 7], "kwargs": {}, "expected": 10} in (
        add["public"] + add["hidden"]
    )
    pair = problems["taco-sort-pair"]
    assert pair["meta"]["call_outputs_unwrapped"] is False
    assert {"fn_name": "sort_pair", "args": [9, 1], "kwargs": {}, "expected": [1, 9]} in (
        pair["public"] + pair["hidden"]
    )


def test_taco_reimport_changes_nothing(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    path = write_taco(tmp_path)
    _import(sessions, path)
    before = _problems(sessions)
    again = _import(sessions, path)
    assert (again.inserted, again.unchanged) == (0, len(TACO_KEPT))
    assert _rules(again) == TACO_DROPS
    assert _problems(sessions) == before


def test_taco_bad_line_does_not_abort(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    report = _import(sessions, write_taco(tmp_path, garbage_line=True))
    assert report.inserted == len(TACO_KEPT)
    assert report.bad[0].row == 2 and report.bad[0].reason.startswith("not valid JSON")
    assert _rules(report) == {**TACO_DROPS, "not valid JSON": 1}


def test_taco_verify_needs_an_executor(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="needs an executor"):
        _import(sessions, write_taco(tmp_path), verify=True)
    with sessions.begin() as session:
        assert repo_datasets.get_dataset(session, name="taco") is None


def test_taco_verify_runs_reference_solutions(
    sessions: sessionmaker[Session], tmp_path: Path, executor: ExecutorClient
) -> None:
    report = _import(sessions, write_taco(tmp_path), verify=True, executor=executor)
    assert _rules(report) == {**TACO_DROPS, "unverified": 1}
    unverified = [bad for bad in report.bad if bad.reason.startswith("unverified")]
    assert unverified[0].external_id == TACO_UNSOLVABLE
    assert "no reference solution passes (tried 2 of 2)" in unverified[0].reason
    problems = _problems(sessions)
    assert set(problems) == TACO_KEPT - {TACO_UNSOLVABLE}
    assert problems["taco-sum"]["meta"]["verified_by"] == 1  # the first solution is wrong
    assert problems["taco-add"]["meta"]["verified_by"] == 0


# --- TACO-Cobalt -----------------------------------------------------------------------


@pytest.mark.parametrize("file_format", ["jsonl", "parquet"])
def test_taco_cobalt_import(
    sessions: sessionmaker[Session], tmp_path: Path, file_format: str
) -> None:
    path = write_taco_cobalt(tmp_path, file_format)
    report = _import(sessions, path, fmt="taco-cobalt", name="tc")
    assert (report.read, report.inserted) == (TACO_COBALT_ROWS, len(TACO_COBALT_KEPT))
    assert _rules(report) == TACO_COBALT_DROPS
    reasons = {bad.external_id: bad.reason for bad in report.bad}
    assert reasons["tc-no-statement"] == (
        "malformed: missing column: one of instruction, question, problem, statement"
    )
    assert "private_test_cases" in reasons["tc-no-hidden"]
    assert reasons["tc-bad-json"].startswith("malformed: column 'public_test_cases' is not")
    assert reasons[None].startswith("malformed: missing column: one of id, problem_id")
    assert reasons["tc-unequal"] == "unequal_tests: private_test_cases: 3 inputs but 2 outputs"

    problems = _problems(sessions, "tc")
    assert set(problems) == TACO_COBALT_KEPT
    cases = problems["tc-cases"]
    assert cases["public"] == [
        {"stdin": "1 2\n", "expected_stdout": "3\n"},
        {"stdin": "2 2\n", "expected_stdout": "4\n"},
    ]
    assert len(cases["hidden"]) == 3 and cases["difficulty"] == "EASY"
    suite = problems["tc-full-suite"]
    assert suite["public"] == [
        {"stdin": "2\n1 1", "expected_stdout": "2"},
        {"stdin": "3\n1 2 3", "expected_stdout": "6"},
    ]
    assert [t["expected_stdout"] for t in suite["hidden"]] == ["5", "8", "0", "10"]
    assert suite["meta"]["hidden_is_full_suite_minus_public"] is True
    assert suite["meta"]["url"] == "https://example.com/full-suite"
    hidden_io = problems["tc-hidden-io"]
    assert (len(hidden_io["public"]), len(hidden_io["hidden"])) == (1, 3)
    assert hidden_io["meta"]["hidden_is_full_suite_minus_public"] is False

    again = _import(sessions, path, fmt="taco-cobalt", name="tc")
    assert (again.inserted, again.unchanged) == (0, len(TACO_COBALT_KEPT))


def test_taco_cobalt_call_tests(sessions: sessionmaker[Session], tmp_path: Path) -> None:
    _import(sessions, write_taco_cobalt(tmp_path), fmt="taco-cobalt", name="tc")
    problems = _problems(sessions, "tc")
    wrapped = problems["tc-call-wrapped"]
    assert (wrapped["test_style"], wrapped["fn_name"]) == ("call", "add")
    assert wrapped["public"] == [{"fn_name": "add", "args": [1, 2], "kwargs": {}, "expected": 3}]
    assert [t["expected"] for t in wrapped["hidden"]] == [7, 9]
    assert wrapped["meta"]["call_outputs_unwrapped"] is True
    objects = problems["tc-call-objects"]
    assert objects["public"] == [
        {"fn_name": "scale", "args": [[1, 2], 3], "kwargs": {}, "expected": [3, 6]}
    ]
    assert [(t["args"], t["expected"]) for t in objects["hidden"]] == [
        ([[4], 2], [8]),
        ([[], 5], []),
    ]
    assert objects["meta"]["call_outputs_unwrapped"] is False


def test_taco_cobalt_call_tests_run_in_the_executor(
    sessions: sessionmaker[Session], tmp_path: Path, executor: ExecutorClient
) -> None:
    _import(sessions, write_taco_cobalt(tmp_path), fmt="taco-cobalt", name="tc")
    objects = _problems(sessions, "tc")["tc-call-objects"]
    tests = [CallTest.model_validate(t) for t in objects["public"] + objects["hidden"]]
    response = executor.execute(ExecuteRequest(code=SCALE_SOLUTION, tests=list(tests)))
    assert response.passed == response.total == 3
