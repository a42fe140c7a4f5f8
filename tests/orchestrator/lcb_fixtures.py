"""Fixture files in LiveCodeBench's `code_generation_lite` layout (JSONL).

Private tests are encoded exactly as LiveCodeBench encodes them (`encode_private`). Besides
valid stdin and functional problems, `write_lcb` writes hostile pickles (whose loading
would run `os.system` or create a file) and malformed rows; the constants say what an
import of the file should report.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import zlib
from pathlib import Path
from typing import Any

NOT_PLAIN_PICKLE = "private tests are not a plain pickled string"


def encode_private(tests: list[dict[str, str]]) -> str:
    """LiveCodeBench's encoding: json.dumps -> pickle.dumps -> zlib -> base64 -> str."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode("utf-8")


def encode_pickle(value: Any) -> str:
    """Any object pickled and packed the same way (for hostile and wrong-type payloads)."""
    return base64.b64encode(zlib.compress(pickle.dumps(value))).decode("utf-8")


class RunsShell:
    """Unpickling this runs `touch MARKER` through `os.system`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


class CreatesFile:
    """Unpickling this opens (and so creates) MARKER for writing."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.marker), "w"))


class SneakyStr(str):
    """A str subclass: its pickle needs a global, so it is refused too."""


def stdin_test(given: str, wanted: str) -> dict[str, str]:
    return {"input": given, "output": wanted, "testtype": "stdin"}


def call_test(given: str, wanted: str) -> dict[str, str]:
    return {"input": given, "output": wanted, "testtype": "functional"}


# --- valid problems ------------------------------------------------------------------

ATCODER_STATEMENT = (
    "You are given two integers A and B. Print A+B.\n\n"
    "Constraints\n\n- 1 \\leq A, B \\leq 100\n\n"
    "Input\n\nThe input is given from Standard Input in the following format:\nA B\n\n"
    "Output\n\nPrint the answer.\n\n"
    "Sample Input 1\n\n3 5\n\nSample Output 1\n\n8\n\n"
    "Sample Input 2\n\n1 1\n\nSample Output 2\n\n2"
)
ATCODER_STRIPPED = ATCODER_STATEMENT.split("\n\nSample Input 1")[0]
ATCODER_PUBLIC = [stdin_test("3 5\n", "8\n"), stdin_test("1 1\n", "2\n")]
ATCODER_PRIVATE = [stdin_test(f"{a} {a * 7}\n", f"{a * 8}\n") for a in range(1, 6)]
ATCODER_SOLUTION = "a, b = map(int, input().split())\nprint(a + b)\n"

LEETCODE_STATEMENT = (
    "Given an array nums and an integer k, return the k-th largest element.\n"
    "As Example 1 shows, duplicates count.\n\n"
    "Example 1:\n\nInput: nums = [3,2,1,5,6,4], k = 2\nOutput: 5\n\n"
    "Example 2:\n\nInput: nums = [3,2,3,1,2,4,5,5,6], k = 4\nOutput: 4\n\n"
    "Constraints:\n\n1 <= k <= nums.length <= 10^5"
)
LEETCODE_STRIPPED = (
    "Given an array nums and an integer k, return the k-th largest element.\n"
    "As Example 1 shows, duplicates count."
)
LEETCODE_STARTER = (
    "class Solution:\n    def findKthLargest(self, nums: List[int], k: int) -> int:\n        "
)
LEETCODE_PUBLIC = [
    call_test("[3,2,1,5,6,4]\n2", "5"),
    call_test("[3,2,3,1,2,4,5,5,6]\n4", "4"),
]
LEETCODE_PRIVATE = [
    call_test("[1]\n1", "1"),
    call_test("[7,7,7]\n2", "7"),
    call_test("[-1,2,0]\n3", "-1"),
]
LEETCODE_SOLUTION = (
    "from typing import List\n\n"
    "class Solution:\n"
    "    def findKthLargest(self, nums: List[int], k: int) -> int:\n"
    "        return sorted(nums, reverse=True)[k - 1]\n"
)

# A functional problem returning a list and taking a string: JSON values of every kind.
PAIRS_PUBLIC = [call_test('"abcab"\n["a","b"]', "[2, 2]")]
PAIRS_PRIVATE = [call_test('"zzz"\n["z","y"]', "[3,0]")]

# Stored as plain JSON text (some releases do this).
PLAIN_PUBLIC = [stdin_test("4\n", "16\n")]
PLAIN_PRIVATE = [stdin_test("5\n", "25\n"), stdin_test("0\n", "0\n")]

KEPT = {"abc301_a", "215", "2999", "1850A"}
"""External ids of the rows that import."""

# --- rows that must be rejected --------------------------------------------------------

HOSTILE_IDS = ("hostile-system", "hostile-open", "hostile-subclass", "hostile-list")
BAD_REASONS = {
    "hostile-system": NOT_PLAIN_PICKLE,
    "hostile-open": NOT_PLAIN_PICKLE,
    "hostile-subclass": NOT_PLAIN_PICKLE,
    "hostile-list": NOT_PLAIN_PICKLE,
    "no-statement": "missing column 'question_content'",
    "bad-public": "column 'public_test_cases' is not valid JSON",
    "bad-base64": "private_test_cases is neither JSON nor base64",
    "not-zlib": "private tests are not zlib data",
    "no-func-name": "functional problem without metadata.func_name",
    "mixed": "tests mix testtypes 'stdin' and 'functional'",
    "bad-testtype": "public_test_cases[0] is not {input: str, output: str, testtype:",
    "bad-call-input": "functional test is not JSON lines",
    "no-tests": "no tests",
}
"""external id -> the start of its BadRow reason."""
ROWS = len(KEPT) + len(BAD_REASONS) + 1  # + one line that is not a JSON object
NOT_AN_OBJECT_ROW = 6


def _row(
    question_id: str,
    *,
    statement: str = "Read a number and print its square.",
    public: list[dict[str, str]] | str | None = None,
    private: str | None = None,
    metadata: dict[str, Any] | None = None,
    platform: str = "codeforces",
    starter_code: str = "",
    difficulty: str = "easy",
) -> dict[str, Any]:
    return {
        "question_title": f"Problem {question_id}",
        "question_content": statement,
        "platform": platform,
        "question_id": question_id,
        "contest_id": f"contest-{question_id}",
        "contest_date": "2023-08-19T00:00:00",
        "starter_code": starter_code,
        "difficulty": difficulty,
        "public_test_cases": json.dumps(PLAIN_PUBLIC if public is None else public)
        if not isinstance(public, str)
        else public,
        "private_test_cases": encode_private(PLAIN_PRIVATE) if private is None else private,
        "metadata": json.dumps(metadata or {}),
    }


def lcb_rows(marker: Path) -> list[dict[str, Any] | str]:
    """The fixture rows in file order; a str is written as that raw line."""
    return [
        _row(
            "abc301_a",
            statement=ATCODER_STATEMENT,
            public=ATCODER_PUBLIC,
            private=encode_private(ATCODER_PRIVATE),
            platform="atcoder",
        ),
        _row(
            "215",
            statement=LEETCODE_STATEMENT,
            public=LEETCODE_PUBLIC,
            private=encode_private(LEETCODE_PRIVATE),
            metadata={"func_name": "findKthLargest"},
            platform="leetcode",
            starter_code=LEETCODE_STARTER,
            difficulty="medium",
        ),
        _row(
            "hostile-system",
            private=encode_pickle(RunsShell(marker)),
        ),
        _row(
            "2999",
            public=PAIRS_PUBLIC,
            private=encode_private(PAIRS_PRIVATE),
            metadata={"func_name": "countPairs"},
            platform="leetcode",
        ),  # fmt: skip
        _row("1850A", private=json.dumps(PLAIN_PRIVATE), difficulty="hard"),
        "[1, 2, 3]",  # row 6: not a JSON object
        _row("hostile-open", private=encode_pickle(CreatesFile(marker))),
        _row("hostile-subclass", private=encode_pickle(SneakyStr(json.dumps(PLAIN_PRIVATE)))),
        _row("hostile-list", private=encode_pickle(PLAIN_PRIVATE)),
        {**_row("no-statement"), "question_content": ""},
        _row("bad-public", public="[{not json"),
        _row("bad-base64", private="%%% not base64 %%%"),
        _row("not-zlib", private=base64.b64encode(b"plain bytes").decode()),
        _row("no-func-name", public=PAIRS_PUBLIC, private=encode_private(PAIRS_PRIVATE)),
        _row(
            "mixed",
            public=PLAIN_PUBLIC,
            private=encode_private(PAIRS_PRIVATE),
            metadata={"func_name": "countPairs"},
        ),  # fmt: skip
        _row("bad-testtype", public=[{"input": "1", "output": "1", "testtype": "other"}]),
        _row(
            "bad-call-input",
            public=[call_test("[1, 2", "3")],
            private=encode_private([]),
            metadata={"func_name": "f"},
        ),  # fmt: skip
        _row("no-tests", public=[], private=encode_private([])),
    ]


def write_lcb(directory: Path, marker: Path) -> Path:
    """Write the fixture rows as `test.jsonl` in `directory`; `marker` must never appear."""
    path = directory / "test.jsonl"
    lines = [row if isinstance(row, str) else json.dumps(row) for row in lcb_rows(marker)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
