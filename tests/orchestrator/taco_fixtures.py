"""Fixture files in the real TACO and TACO-Cobalt layouts, written as JSONL or Parquet.

`write_taco` and `write_taco_cobalt` write rows that pass, rows that hit each drop rule
and malformed rows; the constants below say what an import of them should report.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

PAD = (
    " The input is read from standard input and the answer is printed to standard output."
    " All values are small, so any correct approach finishes well within the time limit."
)
"""Makes a statement long enough for the 100-alphanumeric-character rule."""


def statement(summary: str) -> str:
    return summary + PAD


def hashed_id(question: str) -> str:
    """The external id the taco importer gives a row without an id column."""
    return "q" + hashlib.sha256(question.encode("utf-8")).hexdigest()[:16]


def _io(inputs: list[Any], outputs: list[Any], fn_name: str | None = None) -> str:
    value: dict[str, Any] = {"inputs": inputs, "outputs": outputs}
    if fn_name is not None:
        value["fn_name"] = fn_name
    return json.dumps(value)


def _sum_io(count: int) -> str:
    pairs = [(a, a * 3 + 1) for a in range(1, count + 1)]
    return _io([f"{a} {b}\n" for a, b in pairs], [f"{a + b}\n" for a, b in pairs])


SUM_SOLUTION = "a, b = map(int, input().split())\nprint(a + b)\n"
WRONG_SOLUTION = "print(0)\n"

# --- raw TACO ------------------------------------------------------------------------

SUM_LIST_QUESTION = statement(
    "Read n on the first line and n integers on the second; print their sum, then n."
)
LENGTHS = [13, 2, 25, 7, 1, 19, 10, 4, 22, 16, 6, 24, 3, 11, 18, 9, 21, 5, 15, 8, 23, 12,
           17, 20, 14]  # fmt: skip
"""Input lengths of the 25-test problem, out of order so trimming must sort by length."""

TACO_KEPT = {
    "taco-sum",
    hashed_id(SUM_LIST_QUESTION),
    "taco-add",
    "taco-sort-pair",
    "taco-many",
    "taco-unsolvable",
}
TACO_UNSOLVABLE = "taco-unsolvable"
TACO_DROPS = {
    "too_few_tests": 1,
    "unequal_tests": 1,
    "mentions_image": 3,
    "short_statement": 1,
    "malformed": 3,
}
TACO_ROWS = len(TACO_KEPT) + sum(TACO_DROPS.values())


def taco_rows() -> list[dict[str, Any]]:
    """Raw TACO rows (TACO-verified's `id` on all but one): every column is a string."""
    add_pairs = [(a, 2 * a + 1) for a in range(9)]
    pair_inputs = [[9, 1], [3, 4], [5, 2], [0, 0], [7, 8], [6, 1], [2, 9], [4, 3]]
    lists = [[1, 2, 3], [5], [4, 4], [10, 20, 30, 40], [7, 1], [0], [2, 2, 2], [9, 8, 7, 6, 5]]
    rows: list[dict[str, Any]] = [
        {
            "id": "taco-sum",
            "question": statement("Given two integers a and b on one line, print a + b."),
            "input_output": _sum_io(10),
            "solutions": json.dumps([WRONG_SOLUTION, SUM_SOLUTION]),
            "difficulty": "EASY",
            "url": "https://example.com/problems/sum",
            "source": "codeforces",
            "picture_num": "0",
        },
        {  # no id column, list-valued tests (raw TACO)
            "question": SUM_LIST_QUESTION,
            "input_output": _io(
                [[str(len(xs)), " ".join(map(str, xs))] for xs in lists],
                [[str(sum(xs)), str(len(xs))] for xs in lists],
            ),
            "solutions": json.dumps(
                [
                    "n = int(input())\nxs = list(map(int, input().split()))\n"
                    "print(sum(xs))\nprint(n)\n"
                ]
            ),
            "difficulty": "MEDIUM",
        },
        {  # call-based, TACO's wrapped outputs
            "id": "taco-add",
            "question": statement("Write add(a, b) returning the sum of its two arguments."),
            "input_output": _io(
                [[a, b] for a, b in add_pairs], [[a + b] for a, b in add_pairs], "add"
            ),
            "starter_code": "def add(a, b):\n    ",
            "solutions": json.dumps(["def add(a, b):\n    return a + b\n"]),
            "difficulty": "EASY",
        },
        {  # call-based, unwrapped list outputs
            "id": "taco-sort-pair",
            "question": statement("Write sort_pair(a, b) returning [min, max] of a and b."),
            "input_output": _io(pair_inputs, [sorted(p) for p in pair_inputs], "sort_pair"),
            "solutions": json.dumps(["def sort_pair(a, b):\n    return sorted([a, b])\n"]),
        },
        {  # 25 tests: trimmed to the 5 shortest and 15 longest inputs
            "id": "taco-many",
            "question": statement("Given a line of x characters, print its length."),
            "input_output": _io(["x" * n for n in LENGTHS], [str(n) for n in LENGTHS]),
            "solutions": json.dumps(["print(len(input()))\n"]),
        },
        {  # every reference solution is wrong
            "id": TACO_UNSOLVABLE,
            "question": statement("Given two integers a and b on one line, print a + b too."),
            "input_output": _sum_io(8),
            "solutions": json.dumps([WRONG_SOLUTION, "print(1)\n"]),
        },
        {
            "id": "taco-too-few",
            "question": statement("Print a + b for two integers a and b."),
            "input_output": _sum_io(7),
        },
        {
            "id": "taco-unequal",
            "question": statement("Print a + b for integers a and b, unequal edition."),
            "input_output": _io(["1 2"] * 8, ["3"] * 9),
        },
        {
            "id": "taco-image-tag",
            "question": statement("Count the squares in the figure. <image>"),
            "input_output": _sum_io(8),
        },
        {
            "id": "taco-image-url",
            "question": statement("See https://example.com/img/grid.PNG for the grid layout."),
            "input_output": _sum_io(8),
        },
        {
            "id": "taco-picture-num",
            "question": statement("The statement of this problem had a picture."),
            "input_output": _sum_io(8),
            "picture_num": "1",
        },
        {
            "id": "taco-short",
            "question": "Print a+b.",
            "input_output": _sum_io(8),
        },
        {
            "id": "taco-bad-json",
            "question": statement("Broken test JSON."),
            "input_output": '{"inputs": ["1 2"], "outputs": [',
        },
        {
            "id": "taco-no-question",
            "input_output": _sum_io(8),
        },
        {
            "id": "taco-no-outputs",
            "question": statement("The tests have inputs only."),
            "input_output": json.dumps({"inputs": ["1 2"] * 8}),
        },
    ]
    return rows


# --- TACO-Cobalt ---------------------------------------------------------------------

TACO_COBALT_KEPT = {
    "tc-cases",
    "tc-full-suite",
    "tc-hidden-io",
    "tc-call-wrapped",
    "tc-call-objects",
}
TACO_COBALT_DROPS = {"malformed": 4, "unequal_tests": 1}
TACO_COBALT_ROWS = len(TACO_COBALT_KEPT) + sum(TACO_COBALT_DROPS.values())
SCALE_SOLUTION = "def scale(xs, k):\n    return [x * k for x in xs]\n"


def _cases(pairs: list[tuple[str, str]], testtype: str = "stdin") -> str:
    return json.dumps([{"input": i, "output": o, "testtype": testtype} for i, o in pairs])


def taco_cobalt_rows() -> list[dict[str, Any]]:
    """TACO-Cobalt rows in the column variants the importer accepts."""
    suite_in = [["2", "1 1"], ["3", "1 2 3"], ["1", "5"], ["2", "4 4"], ["1", "0"], ["2", "9 1"]]
    suite_out = ["2", "6", "5", "8", "0", "10"]
    return [
        {  # public/private test-case lists (LiveCodeBench-like objects)
            "id": "tc-cases",
            "instruction": statement("Print a + b."),
            "public_test_cases": _cases([("1 2\n", "3\n"), ("2 2\n", "4\n")]),
            "private_test_cases": _cases([("5 5\n", "10\n"), ("0 0\n", "0\n"), ("9 1\n", "10\n")]),
            "difficulty": "EASY",
        },
        {  # input_output is the whole suite; the public part is a subset of it
            "problem_id": "tc-full-suite",
            "question": statement("Read n, then n integers; print their sum."),
            "public_input_output": _io(suite_in[:2], suite_out[:2]),
            "input_output": _io(suite_in, suite_out),
            "url": "https://example.com/full-suite",
        },
        {  # input_output holds only the hidden tests
            "id": "tc-hidden-io",
            "question": statement("Print twice the integer."),
            "public_tests": _io(["1\n"], ["2\n"]),
            "input_output": _io(["2\n", "3\n", "4\n"], ["4\n", "6\n", "8\n"]),
        },
        {  # call-based in TACO's shape: argument lists, wrapped outputs, fn_name in the JSON
            "id": "tc-call-wrapped",
            "question": statement("Write add(a, b)."),
            "public_test_cases": _io([[1, 2]], [[3]], "add"),
            "private_test_cases": _io([[2, 5], [10, -1]], [[7], [9]], "add"),
            "starter_code": "def add(a, b):\n    ",
        },
        {  # call-based objects holding JSON text; one argument per line; unwrapped outputs
            "id": "tc-call-objects",
            "instruction": statement("Write scale(xs, k) multiplying every element by k."),
            "fn_name": "scale",
            "public_test_cases": _cases([("[1, 2]\n3", "[3, 6]")], "functional"),
            "private_test_cases": _cases([("[[4], 2]", "[8]"), ("[]\n5", "[]")], "functional"),
        },
        {
            "id": "tc-no-statement",
            "public_test_cases": _cases([("1\n", "1\n")]),
            "private_test_cases": _cases([("2\n", "2\n")]),
        },
        {
            "id": "tc-no-hidden",
            "question": statement("Hidden tests are missing."),
            "public_test_cases": _cases([("1\n", "1\n")]),
        },
        {
            "id": "tc-bad-json",
            "question": statement("Public tests are broken JSON."),
            "public_test_cases": '[{"input": "1", "output": ',
            "private_test_cases": _cases([("2\n", "2\n")]),
        },
        {
            "question": statement("The id is missing."),
            "public_test_cases": _cases([("1\n", "1\n")]),
            "private_test_cases": _cases([("2\n", "2\n")]),
        },
        {
            "id": "tc-unequal",
            "question": statement("Unequal hidden tests."),
            "public_test_cases": _cases([("1\n", "1\n")]),
            "private_test_cases": _io(["1", "2", "3"], ["1", "2"]),
        },
    ]


# --- writers ---------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict[str, Any]], *, garbage_line: bool = False) -> Path:
    """Rows as JSON lines; `garbage_line` adds a line that is not JSON after the first."""
    lines = [json.dumps(row) for row in rows]
    if garbage_line:
        lines.insert(1, "{this is not json")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    """Rows as a Parquet table; a column a row lacks is null there, as in HF exports."""
    columns = list(dict.fromkeys(column for row in rows for column in row))
    table = pa.Table.from_pylist([{column: row.get(column) for column in columns} for row in rows])
    pq.write_table(table, path)
    return path


def write_taco(directory: Path, fmt: str = "jsonl", *, garbage_line: bool = False) -> Path:
    """`taco_rows()` as `taco.jsonl` or `taco.parquet` in `directory`."""
    if fmt == "parquet":
        return write_parquet(directory / "taco.parquet", taco_rows())
    return write_jsonl(directory / "taco.jsonl", taco_rows(), garbage_line=garbage_line)


def write_taco_cobalt(directory: Path, fmt: str = "jsonl") -> Path:
    """`taco_cobalt_rows()` as `taco_cobalt.jsonl` or `taco_cobalt.parquet` in `directory`."""
    if fmt == "parquet":
        return write_parquet(directory / "taco_cobalt.parquet", taco_cobalt_rows())
    return write_jsonl(directory / "taco_cobalt.jsonl", taco_cobalt_rows())
