"""LiveCodeBench `code_generation_lite` release files (`test.jsonl`, `test2.jsonl`, ...).

Columns read (all text, as the release files hold them):

- `question_id` (required): the external id.
- `question_content` (required): the statement.
- `public_test_cases` (required): JSON, a list of `{"input", "output", "testtype"}` with
  `testtype` `"stdin"` or `"functional"`; these are the public tests.
- `private_test_cases` (required, may encode an empty list): the same list, stored as
  base64 of zlib of a pickle of the JSON text; plain JSON text is accepted too (some
  releases store that). These are the hidden tests.
- `metadata`: JSON object; `func_name` is required for functional problems.
- `starter_code`, `difficulty`, `platform`, `contest_id`, `contest_date`, `question_title`
  (optional): kept, the first two as `starter_code` and `difficulty`, the rest in
  `source_metadata`.

The pickle layer is never trusted. `decode_private_tests` base64-decodes strictly,
inflates at most `MAX_DECOMPRESSED_BYTES`, and unpickles with `_StringUnpickler`, whose
`find_class` refuses every global, so no pickle can import or call anything (the
`GLOBAL`/`STACK_GLOBAL`/`REDUCE` route to code execution always goes through
`find_class`); the result must then be exactly a `str`. Anything else is a `BadRow`:
"private tests are not a plain pickled string".

Tests. Every test of a problem must have the same `testtype` (it becomes `test_style`):

- `stdin`: `StdinTest(stdin=input, expected_stdout=output)`.
- `functional`: `CallTest(fn_name=metadata["func_name"], args=[...], expected=...)`, where
  `args` are the lines of `input`, each parsed as one JSON value (one line per argument),
  and `expected` is `output` parsed as JSON (LiveCodeBench's own harness reads them the
  same way). For LeetCode problems the function is a method of `class Solution`, which
  the executor's call harness handles.
- `options.functional_as_stdin` (a parity option, not a fix): functional tests become
  stdin tests with the raw `input` and `output` text and `test_style` is `stdin`, as the
  research code ran them. Only to reproduce its numbers: a correct LeetCode solution
  defines a method and prints nothing, so it fails these tests.

`options.strip_examples` cuts the statement before its worked examples, as the paper did:
at the first line that starts (after optional spaces, tabs and Markdown `#`/`*`/`>`
markers) with `Example 1` or `Sample Input 1` not followed by another digit
(case-sensitive; so "Example 1:" and "Sample Input 1" match, "Example 10" and a mention of
"Example 1" inside a sentence do not). Trailing whitespace before the cut is dropped. A
statement with no such line, or with nothing before it, is kept whole.
`source_metadata["examples_stripped"]` records whether a cut happened.

`source_metadata` holds `platform`, `contest_id`, `contest_date`, `question_title` (those
present), `testtype` (the original one), `func_name` (functional problems) and, when the
options apply, `examples_stripped` and `functional_as_stdin`. Neither `options.seed` nor
`options.public_tests` applies: the release file fixes which tests are public.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
import pickle
import re
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cobalt.orchestrator.datasets.importing import ImportOptions, validation_reason
from cobalt.orchestrator.datasets.records import BadRow, read_records
from cobalt.shared.contracts import CallTest, ProblemRow, StdinTest, TestStyle

__all__ = [
    "MAX_DECOMPRESSED_BYTES",
    "NOT_PLAIN_PICKLE",
    "decode_private_tests",
    "read_problems",
    "strip_examples",
]

MAX_DECOMPRESSED_BYTES = 512 * 1024 * 1024
"""Largest inflated private-test payload accepted, in bytes (the biggest real row is far
smaller); a zlib bomb stops here instead of exhausting memory."""

NOT_PLAIN_PICKLE = "private tests are not a plain pickled string"
"""The BadRow reason for a pickle that is not just a `str` (or tries to load a global)."""

_TESTTYPES = ("stdin", "functional")
_METADATA_COLUMNS = ("platform", "contest_id", "contest_date", "question_title")
_EXAMPLES = re.compile(r"^[ \t#*>]*(?:Example 1|Sample Input 1)(?!\d)", re.MULTILINE)


class _RowError(ValueError):
    """A row cannot become a problem; the message is the BadRow reason."""


class _StringUnpickler(pickle.Unpickler):
    """An unpickler that resolves no global at all: only built-in pickle values load."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"global {module}.{name} refused")


def _inflate(data: bytes) -> bytes:
    inflater = zlib.decompressobj()
    try:
        out = inflater.decompress(data, MAX_DECOMPRESSED_BYTES)
    except zlib.error as exc:
        raise _RowError(f"private tests are not zlib data: {exc}") from exc
    if inflater.unconsumed_tail:
        raise _RowError(
            f"private tests inflate to more than {MAX_DECOMPRESSED_BYTES} bytes; refused"
        )
    if not inflater.eof:
        raise _RowError("private tests are truncated zlib data")
    return out


def _unpickle_string(data: bytes) -> str:
    try:
        value = _StringUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # any malformed pickle: pickle raises many exception types
        raise _RowError(NOT_PLAIN_PICKLE) from exc
    if type(value) is not str:
        raise _RowError(NOT_PLAIN_PICKLE)
    return value


def decode_private_tests(value: str) -> list[Any]:
    """The list LiveCodeBench's `private_test_cases` encodes, without trusting the pickle.

    Args:
        value: Plain JSON text, or base64 of zlib of a pickled JSON string.

    Returns:
        The decoded list (its items are not checked here).

    Raises:
        ValueError: the value is neither form, or the pickle is anything but a `str`.
    """
    try:
        plain = json.loads(value)
    except ValueError:
        pass
    else:
        if not isinstance(plain, list):
            raise _RowError("private_test_cases is JSON but not a list")
        return plain
    try:
        packed = base64.b64decode(value.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise _RowError("private_test_cases is neither JSON nor base64") from exc
    text = _unpickle_string(_inflate(packed))
    try:
        decoded = json.loads(text)
    except ValueError as exc:
        raise _RowError(f"private tests are not valid JSON: {exc}") from exc
    if not isinstance(decoded, list):
        raise _RowError("private tests are not a JSON list")
    return decoded


def strip_examples(statement: str) -> str | None:
    """`statement` cut before its first worked example, or None if there is nothing to cut.

    See the module docstring for exactly what is matched.
    """
    match = _EXAMPLES.search(statement)
    if match is None:
        return None
    head = statement[: match.start()].rstrip()
    return head or None


def _json_column(record: Mapping[str, Any], column: str, *, required: bool = True) -> Any:
    value = record.get(column)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise _RowError(f"missing column {column!r}")
        return None
    if not isinstance(value, str):
        return value  # already decoded (e.g. a Parquet or JSON-array file)
    try:
        return json.loads(value)
    except ValueError as exc:
        raise _RowError(f"column {column!r} is not valid JSON: {exc}") from exc


def _text_column(record: Mapping[str, Any], column: str) -> str:
    value = record.get(column)
    if not isinstance(value, str) or not value.strip():
        raise _RowError(f"missing column {column!r}")
    return value


def _raw_tests(value: Any, column: str) -> list[tuple[str, str, str]]:
    """(input, output, testtype) of each test in a decoded test list."""
    if not isinstance(value, list):
        raise _RowError(f"{column} is not a list")
    tests = []
    for index, test in enumerate(value):
        if not (
            isinstance(test, dict)
            and isinstance(test.get("input"), str)
            and isinstance(test.get("output"), str)
            and test.get("testtype") in _TESTTYPES
        ):
            raise _RowError(
                f"{column}[{index}] is not {{input: str, output: str, "
                "testtype: 'stdin' | 'functional'}"
            )
        tests.append((test["input"], test["output"], test["testtype"]))
    return tests


def _call_test(fn_name: str, test_input: str, test_output: str) -> CallTest:
    try:
        args = [json.loads(line) for line in test_input.split("\n") if line.strip()]
        expected = json.loads(test_output)
    except ValueError as exc:
        raise _RowError(f"functional test is not JSON lines: {exc}") from exc
    return CallTest(fn_name=fn_name, args=args, expected=expected)


def _external_id(record: Mapping[str, Any]) -> str | None:
    value = record.get("question_id")
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    text = str(value).strip()
    return text or None


def _only_testtype(tests: list[tuple[str, str, str]]) -> str:
    testtypes = {testtype for _, _, testtype in tests}
    if not testtypes:
        raise _RowError("no tests")
    if len(testtypes) > 1:
        raise _RowError("tests mix testtypes 'stdin' and 'functional'")
    return testtypes.pop()


def _func_name(record: Mapping[str, Any]) -> str:
    metadata = _json_column(record, "metadata", required=False) or {}
    func_name = metadata.get("func_name") if isinstance(metadata, dict) else None
    if not isinstance(func_name, str) or not func_name:
        raise _RowError("functional problem without metadata.func_name")
    return func_name


def _convert(
    tests: list[tuple[str, str, str]], *, fn_name: str | None
) -> list[StdinTest | CallTest]:
    """Call tests of `fn_name`, or stdin tests of the raw text when `fn_name` is None."""
    if fn_name is None:
        return [StdinTest(stdin=given, expected_stdout=wanted) for given, wanted, _ in tests]
    return [_call_test(fn_name, given, wanted) for given, wanted, _ in tests]


def _problem(record: Mapping[str, Any], options: ImportOptions) -> ProblemRow:
    external_id = _external_id(record)
    if external_id is None:
        raise _RowError("missing column 'question_id'")
    statement = _text_column(record, "question_content")
    public = _raw_tests(_json_column(record, "public_test_cases"), "public_test_cases")
    private_value = record.get("private_test_cases")
    if not isinstance(private_value, str):
        raise _RowError("missing column 'private_test_cases'")
    private = _raw_tests(decode_private_tests(private_value), "private_test_cases")
    testtype = _only_testtype(public + private)
    meta: dict[str, Any] = {
        column: record[column] for column in _METADATA_COLUMNS if record.get(column) is not None
    }
    meta["testtype"] = testtype
    fn_name: str | None = None
    if testtype == "functional":
        meta["func_name"] = _func_name(record)
        if options.functional_as_stdin:
            meta["functional_as_stdin"] = True
        else:
            fn_name = meta["func_name"]
    if options.strip_examples:
        stripped = strip_examples(statement)
        meta["examples_stripped"] = stripped is not None
        statement = stripped or statement
    difficulty = record.get("difficulty")
    starter_code = record.get("starter_code")
    return ProblemRow(
        external_id=external_id,
        statement=statement,
        starter_code=starter_code if isinstance(starter_code, str) else "",
        test_style=TestStyle.STDIN if fn_name is None else TestStyle.CALL,
        fn_name=fn_name,
        public_tests=list(_convert(public, fn_name=fn_name)),
        hidden_tests=list(_convert(private, fn_name=fn_name)),
        difficulty=str(difficulty) if difficulty is not None else None,
        source_metadata=meta,
    )


def read_problems(path: Path, options: ImportOptions) -> Iterator[ProblemRow | BadRow]:
    """LiveCodeBench problems from a `code_generation_lite` release file.

    Raises:
        InvalidInput: the file does not exist or its format is unknown.
    """
    for number, record in read_records(path):
        if isinstance(record, BadRow):
            yield record
            continue
        external_id = _external_id(record)
        try:
            yield _problem(record, options)
        except ValidationError as exc:
            yield BadRow(number, validation_reason(exc), external_id=external_id)
        except _RowError as exc:
            yield BadRow(number, str(exc), external_id=external_id)
