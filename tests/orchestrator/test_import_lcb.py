"""LiveCodeBench imports end to end: fixture files in the real `code_generation_lite`
layout, through `import_file`, on PostgreSQL and SQLite; hostile pickles are rejected
without running; functional tests checked on the real sandboxed executor."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.datasets.importers import lcb
from cobalt.orchestrator.datasets.importing import ImportOptions, ImportReport, import_file
from cobalt.shared.clients import ExecutorClient
from cobalt.shared.contracts import CallTest, ExecuteRequest, StdinTest
from tests.orchestrator.helpers import Problems, stored_problems
from tests.orchestrator.lcb_fixtures import (
    ATCODER_PRIVATE,
    ATCODER_PUBLIC,
    ATCODER_SOLUTION,
    ATCODER_STATEMENT,
    ATCODER_STRIPPED,
    BAD_REASONS,
    HOSTILE_IDS,
    KEPT,
    LEETCODE_PRIVATE,
    LEETCODE_PUBLIC,
    LEETCODE_SOLUTION,
    LEETCODE_STARTER,
    LEETCODE_STATEMENT,
    LEETCODE_STRIPPED,
    NOT_AN_OBJECT_ROW,
    NOT_PLAIN_PICKLE,
    PLAIN_PRIVATE,
    PLAIN_PUBLIC,
    ROWS,
    CreatesFile,
    RunsShell,
    encode_pickle,
    encode_private,
    write_lcb,
)


@pytest.fixture
def marker(tmp_path: Path) -> Iterator[Path]:
    """The file a hostile pickle would create; asserted absent after every test."""
    path = tmp_path / "pwned"
    yield path
    assert not path.exists(), "a hostile pickle ran"


@pytest.fixture
def lcb_file(tmp_path: Path, marker: Path) -> Path:
    return write_lcb(tmp_path, marker)


def _import(sessions: sessionmaker[Session], path: Path, **options: Any) -> ImportReport:
    return import_file(
        sessions=sessions, name="lcb", fmt="lcb", path=path, options=ImportOptions(**options)
    )


def _problems(sessions: sessionmaker[Session]) -> Problems:
    return stored_problems(sessions, "lcb")


def _as_stdin(tests: list[dict[str, str]]) -> list[dict[str, str]]:
    return [{"stdin": t["input"], "expected_stdout": t["output"]} for t in tests]


def test_counts_and_bad_rows(sessions: sessionmaker[Session], lcb_file: Path) -> None:
    report = _import(sessions, lcb_file)
    assert (report.read, report.inserted, report.unchanged) == (ROWS, len(KEPT), 0)
    assert set(_problems(sessions)) == KEPT
    by_id = {bad.external_id: bad for bad in report.bad}
    assert set(by_id) == {*BAD_REASONS, None}
    for external_id, reason in BAD_REASONS.items():
        assert by_id[external_id].reason.startswith(reason), (external_id, by_id[external_id])
    assert by_id[None].row == NOT_AN_OBJECT_ROW


def test_private_tests_decode_as_livecodebench_encodes_them(
    sessions: sessionmaker[Session], lcb_file: Path
) -> None:
    _import(sessions, lcb_file)
    problems = _problems(sessions)
    atcoder = problems["abc301_a"]
    assert atcoder["test_style"] == "stdin"
    assert atcoder["fn_name"] is None
    assert atcoder["public"] == _as_stdin(ATCODER_PUBLIC)
    assert atcoder["hidden"] == _as_stdin(ATCODER_PRIVATE)
    # The same tests stored as plain JSON text decode the same way.
    plain = problems["1850A"]
    assert (plain["public"], plain["hidden"]) == (_as_stdin(PLAIN_PUBLIC), _as_stdin(PLAIN_PRIVATE))


def test_hostile_pickles_are_bad_rows_and_never_run(
    sessions: sessionmaker[Session], lcb_file: Path, marker: Path
) -> None:
    report = _import(sessions, lcb_file)
    reasons = {bad.external_id: bad.reason for bad in report.bad}
    assert {reasons[external_id] for external_id in HOSTILE_IDS} == {NOT_PLAIN_PICKLE}
    assert not marker.exists()
    assert not set(HOSTILE_IDS) & set(_problems(sessions))


@pytest.mark.parametrize("hostile", [RunsShell, CreatesFile])
def test_decoder_refuses_globals_before_calling_them(marker: Path, hostile: type) -> None:
    for payload in (
        encode_pickle(hostile(marker)),
        # protocol 0 (GLOBAL + REDUCE opcodes) as well as the default STACK_GLOBAL form
        base64.b64encode(zlib.compress(pickle.dumps(hostile(marker), protocol=0))).decode(),
    ):
        with pytest.raises(ValueError, match=NOT_PLAIN_PICKLE):
            lcb.decode_private_tests(payload)
    assert not marker.exists()


def test_decoder_caps_what_zlib_may_inflate(monkeypatch: pytest.MonkeyPatch) -> None:
    tests = [{"input": "x" * 5000, "output": "y", "testtype": "stdin"}]
    payload = encode_private(tests)
    assert lcb.decode_private_tests(payload) == tests
    monkeypatch.setattr(lcb, "MAX_DECOMPRESSED_BYTES", 1000)
    with pytest.raises(ValueError, match="inflate to more than 1000 bytes"):
        lcb.decode_private_tests(payload)
    truncated = base64.b64encode(zlib.compress(pickle.dumps("[]"))[:-4]).decode()
    with pytest.raises(ValueError, match="truncated"):
        lcb.decode_private_tests(truncated)


def test_functional_tests_become_call_tests(
    sessions: sessionmaker[Session], lcb_file: Path
) -> None:
    _import(sessions, lcb_file)
    problems = _problems(sessions)
    leetcode = problems["215"]
    assert leetcode["test_style"] == "call"
    assert leetcode["fn_name"] == "findKthLargest"
    assert leetcode["starter_code"] == LEETCODE_STARTER
    assert leetcode["public"] == [
        {"fn_name": "findKthLargest", "args": [[3, 2, 1, 5, 6, 4], 2], "kwargs": {}, "expected": 5},
        {"fn_name": "findKthLargest", "args": [[3, 2, 3, 1, 2, 4, 5, 5, 6], 4], "kwargs": {},
         "expected": 4},
    ]  # fmt: skip
    assert [t["args"] for t in leetcode["hidden"]] == [[[1], 1], [[7, 7, 7], 2], [[-1, 2, 0], 3]]
    assert [t["expected"] for t in leetcode["hidden"]] == [1, 7, -1]
    assert leetcode["meta"]["func_name"] == "findKthLargest"
    assert leetcode["meta"]["testtype"] == "functional"
    pairs = problems["2999"]
    assert pairs["public"] == [
        {"fn_name": "countPairs", "args": ["abcab", ["a", "b"]], "kwargs": {}, "expected": [2, 2]}
    ]


def test_functional_as_stdin_reproduces_the_research_code(
    sessions: sessionmaker[Session], lcb_file: Path
) -> None:
    _import(sessions, lcb_file, functional_as_stdin=True)
    leetcode = _problems(sessions)["215"]
    assert leetcode["test_style"] == "stdin"
    assert leetcode["fn_name"] is None
    assert leetcode["public"] == _as_stdin(LEETCODE_PUBLIC)
    assert leetcode["hidden"] == _as_stdin(LEETCODE_PRIVATE)
    assert leetcode["meta"]["functional_as_stdin"] is True
    assert leetcode["meta"]["func_name"] == "findKthLargest"
    assert leetcode["starter_code"] == LEETCODE_STARTER
    # stdin problems are the same either way
    assert _problems(sessions)["abc301_a"]["public"] == _as_stdin(ATCODER_PUBLIC)


def test_strip_examples(sessions: sessionmaker[Session], lcb_file: Path) -> None:
    _import(sessions, lcb_file, strip_examples=True)
    problems = _problems(sessions)
    assert problems["abc301_a"]["statement"] == ATCODER_STRIPPED
    assert problems["215"]["statement"] == LEETCODE_STRIPPED
    assert problems["215"]["meta"]["examples_stripped"] is True
    # No worked example: kept whole.
    assert problems["1850A"]["statement"] == "Read a number and print its square."
    assert problems["1850A"]["meta"]["examples_stripped"] is False


def test_statements_are_whole_without_strip_examples(
    sessions: sessionmaker[Session], lcb_file: Path
) -> None:
    _import(sessions, lcb_file)
    problems = _problems(sessions)
    assert problems["abc301_a"]["statement"] == ATCODER_STATEMENT
    assert problems["215"]["statement"] == LEETCODE_STATEMENT
    assert "examples_stripped" not in problems["215"]["meta"]


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("Intro.\n\nExample 1:\nInput: x", "Intro."),
        ("Intro.\n**Example 1:**\nInput: x", "Intro."),
        ("Intro.\n  Sample Input 1\n3", "Intro."),
        ("Intro, see Example 1 below.\nExample 10:\nx", None),  # mid-line; a different number
        ("Example 1:\nonly examples", None),  # nothing before the cut
        ("Intro.\nexample 1:\nx", None),  # case-sensitive
    ],
)
def test_strip_examples_rule(statement: str, expected: str | None) -> None:
    assert lcb.strip_examples(statement) == expected


def test_metadata_is_kept(sessions: sessionmaker[Session], lcb_file: Path) -> None:
    _import(sessions, lcb_file)
    problems = _problems(sessions)
    assert problems["215"]["difficulty"] == "medium"
    assert problems["1850A"]["difficulty"] == "hard"
    assert problems["215"]["meta"] == {
        "platform": "leetcode",
        "contest_id": "contest-215",
        "contest_date": "2023-08-19T00:00:00",
        "question_title": "Problem 215",
        "testtype": "functional",
        "func_name": "findKthLargest",
    }
    assert problems["abc301_a"]["meta"]["platform"] == "atcoder"
    assert problems["abc301_a"]["meta"]["testtype"] == "stdin"


def test_reimport_changes_nothing(sessions: sessionmaker[Session], lcb_file: Path) -> None:
    first = _import(sessions, lcb_file)
    before = _problems(sessions)
    again = _import(sessions, lcb_file)
    assert (again.read, again.inserted, again.unchanged) == (ROWS, 0, len(KEPT))
    assert len(again.bad) == len(first.bad)
    assert _problems(sessions) == before


def test_read_problems_streams_rows(lcb_file: Path) -> None:
    rows = list(lcb.read_problems(lcb_file, ImportOptions()))
    assert len(rows) == ROWS
    leetcode = next(r for r in rows if getattr(r, "external_id", None) == "215")
    assert all(isinstance(t, CallTest) for t in [*leetcode.public_tests, *leetcode.hidden_tests])


@pytest.fixture
def executor(executor_url: str) -> Iterator[ExecutorClient]:
    # Starlette's TestClient is not an httpx.Client here, so the typed client goes over HTTP.
    with ExecutorClient(base_url=executor_url) as client:
        yield client


def test_imported_tests_judge_reference_solutions(
    sessions: sessionmaker[Session], lcb_file: Path, executor: ExecutorClient
) -> None:
    _import(sessions, lcb_file)
    problems = _problems(sessions)
    for external_id, solution in (("215", LEETCODE_SOLUTION), ("abc301_a", ATCODER_SOLUTION)):
        problem = problems[external_id]
        tests = [*problem["public"], *problem["hidden"]]
        response = executor.execute(
            ExecuteRequest.model_validate({"code": solution, "tests": tests})
        )
        assert response.passed == response.total == len(tests), response
    # The research code's behaviour: a correct LeetCode solution fails functional-as-stdin.
    stdin_tests = [
        StdinTest(stdin=t["input"], expected_stdout=t["output"]) for t in LEETCODE_PUBLIC
    ]
    response = executor.execute(ExecuteRequest(code=LEETCODE_SOLUTION, tests=stdin_tests))
    assert response.passed == 0


def test_plain_json_private_tests_need_no_pickle() -> None:
    assert lcb.decode_private_tests(json.dumps(PLAIN_PRIVATE)) == PLAIN_PRIVATE
    with pytest.raises(ValueError, match="JSON but not a list"):
        lcb.decode_private_tests('{"input": "1"}')


@pytest.mark.parametrize("hostile", [RunsShell, CreatesFile])
def test_hostile_fixtures_really_run_code_under_plain_pickle(tmp_path: Path, hostile: type) -> None:
    """Control: the unrestricted pickle does run them, so the tests above are not vacuous."""
    control = tmp_path / "control"
    packed = base64.b64decode(encode_pickle(hostile(control)))
    loaded = pickle.loads(zlib.decompress(packed))  # the point of this control test
    if hasattr(loaded, "close"):
        loaded.close()  # CreatesFile yields the open file
    assert control.exists()
