"""Raw TACO and TACO-verified rows, preprocessed the way the Cobalt paper did
(docs/method.md, "Data").

Columns read:

- `question` (required): the statement.
- `input_output` (required): a JSON object `{"inputs": [...], "outputs": [...]}` with an
  optional `"fn_name"`; with `fn_name` the problem is call-based, otherwise stdin/stdout.
- `id`, `problem_id` or `task_id` (optional; TACO-verified has `id`): the external id.
  Raw TACO has no id column, so the id is then `q` + the first 16 hex digits of the
  SHA-256 of the question: stable across files, splits and row order.
- `difficulty`, `starter_code`, `url`, `source` (optional); `picture_num` (optional, raw
  TACO: pictures the original statement had).
- `solutions` (read only with `verify`): a JSON list of reference programs.

The rules, in order. A dropped row is a `BadRow` whose reason starts with the rule's name
and a colon (`RULE_*`), so an import's bad rows count per rule:

1. `malformed`: a required column is missing, `input_output` is not JSON of that shape,
   or the result is not a valid problem.
2. `unequal_tests`: `inputs` and `outputs` differ in length.
3. `too_few_tests`: fewer than `MIN_TESTS` (8) tests.
4. List-valued tests become strings (stdin problems only: a list of lines is joined with
   newlines; other non-string values are written with `str`). Call-based inputs are
   argument lists and stay values; see "Call-based tests" below.
5. `mentions_image`: the statement holds an image: an `<image>` placeholder (how TACO's
   Codeforces statements mark a picture), an HTML `<img` tag, Markdown `![...](...)`, or
   a reference to an image file (`.png`, `.jpg`, `.jpeg`, `.gif`, `.svg`, `.bmp`,
   `.webp`, in a URL or a file name); or `picture_num` is above 0. The bare words
   "image" and "picture" do not count: many text-only statements use them.
6. `short_statement`: fewer than `MIN_STATEMENT_ALNUM` (100) alphanumeric characters.
7. More than `MAX_TESTS` (20) tests: keep the `KEEP_SHORTEST` (5) shortest and the
   `KEEP_LONGEST` (15) longest inputs (ties broken by position), in their original order.
8. Split: `options.public_tests` tests (4 by default) are public and the rest hidden,
   chosen by `random.Random(f"{options.seed}:{external_id}")`, so a seed always gives the
   same split and each problem its own; both parts keep the original order.
9. `unverified` (only with `options.verify`): each of the first `MAX_VERIFY_SOLUTIONS`
   (3) reference solutions runs on all the kept tests (one `/v1/execute` request per
   solution); the problem stays if one passes them all.

Call-based tests: TACO writes each input as the list of arguments and each output as a
one-element list holding the return value (`{"inputs": [[1, 2]], "outputs": [[3]]}`).
Some rows leave outputs unwrapped. A problem's outputs are unwrapped when every one of
them is a one-element list, and kept as they are otherwise; a function whose every test
returns a one-element list is indistinguishable from the wrapped shape, so
`source_metadata["call_outputs_unwrapped"]` records the choice. An input that is not a
list is a single argument.

`source_metadata` holds `url` and `source` when present, `tests_before` and
`tests_after` (the count before and after step 7) and, with `verify`, `verified_by` (the
index in `solutions` of the program that passed).

The test conversion helpers here (`stdin_test`, `call_tests`, `is_wrapped_outputs`,
`load_json_column`, `RowRejected`) are shared with the `taco-cobalt` importer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cobalt.orchestrator.datasets.importing import Executor, ImportOptions, validation_reason
from cobalt.orchestrator.datasets.records import BadRow, read_records
from cobalt.shared.contracts import CallTest, ExecuteRequest, ProblemRow, StdinTest, TestStyle
from cobalt.shared.errors import InvalidInput

__all__ = [
    "KEEP_LONGEST",
    "KEEP_SHORTEST",
    "MAX_TESTS",
    "MAX_VERIFY_SOLUTIONS",
    "MIN_STATEMENT_ALNUM",
    "MIN_TESTS",
    "RULE_IMAGE",
    "RULE_MALFORMED",
    "RULE_SHORT_STATEMENT",
    "RULE_TOO_FEW_TESTS",
    "RULE_UNEQUAL_TESTS",
    "RULE_UNVERIFIED",
    "RowRejected",
    "call_tests",
    "is_wrapped_outputs",
    "load_json_column",
    "mentions_image",
    "read_problems",
    "stdin_test",
    "trim_indices",
]

logger = logging.getLogger(__name__)

RULE_MALFORMED = "malformed"
RULE_UNEQUAL_TESTS = "unequal_tests"
RULE_TOO_FEW_TESTS = "too_few_tests"
RULE_IMAGE = "mentions_image"
RULE_SHORT_STATEMENT = "short_statement"
RULE_UNVERIFIED = "unverified"

MIN_TESTS = 8
"""Problems with fewer tests are dropped."""
MIN_STATEMENT_ALNUM = 100
"""Statements with fewer alphanumeric characters are dropped."""
MAX_TESTS = 20
"""Problems with more tests keep `KEEP_SHORTEST` + `KEEP_LONGEST` of them."""
KEEP_SHORTEST = 5
KEEP_LONGEST = 15
MAX_VERIFY_SOLUTIONS = 3
"""Reference solutions tried per problem when verifying."""

ID_COLUMNS = ("id", "problem_id", "task_id")

_IMAGE = re.compile(
    r"<image>|<img\b|!\[[^\]]*\]\([^)]*\)|\.(?:png|jpe?g|gif|svg|bmp|webp)\b",
    re.IGNORECASE,
)

Test = StdinTest | CallTest


class RowRejected(Exception):
    """A row breaks rule `rule`; `reason` is what the BadRow reports."""

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"{rule}: {detail}")
        self.rule = rule
        self.reason = f"{rule}: {detail}"


def load_json_column(record: Mapping[str, Any], column: str) -> Any:
    """The value of `column`, decoded if it is JSON text (Parquet may hold it decoded).

    Raises:
        RowRejected: (`malformed`) the column is missing, empty or not valid JSON.
    """
    value = record.get(column)
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if value is None or (isinstance(value, str) and not value.strip()):
        raise RowRejected(RULE_MALFORMED, f"missing column {column!r}")
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError as exc:
        raise RowRejected(RULE_MALFORMED, f"column {column!r} is not valid JSON: {exc}") from exc


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(_as_text(line) for line in value)
    return str(value)


def stdin_test(test_input: Any, test_output: Any) -> StdinTest:
    """A stdin test; a list-valued input or output is a list of lines."""
    return StdinTest(stdin=_as_text(test_input), expected_stdout=_as_text(test_output))


def is_wrapped_outputs(outputs: Sequence[Any]) -> bool:
    """Whether call outputs use TACO's wrapped shape: every one a one-element list."""
    return bool(outputs) and all(isinstance(out, list) and len(out) == 1 for out in outputs)


def call_tests(fn_name: str, pairs: Sequence[tuple[Any, Any]], *, unwrap: bool) -> list[CallTest]:
    """Call tests from (arguments, return value) pairs.

    Args:
        fn_name: The function the tests call.
        pairs: Inputs are argument lists (a non-list is the single argument); outputs are
            return values, each wrapped in a one-element list when `unwrap`.
        unwrap: Take each output's only element (see `is_wrapped_outputs`).
    """
    return [
        CallTest(
            fn_name=fn_name,
            args=list(args) if isinstance(args, list) else [args],
            expected=expected[0] if unwrap else expected,
        )
        for args, expected in pairs
    ]


def mentions_image(statement: str) -> bool:
    """Whether a statement holds an image (rule 5 of the module docstring)."""
    return _IMAGE.search(statement) is not None


def _picture_count(value: Any) -> int:
    """TACO's `picture_num`, an integer or its text (0 when absent or unreadable)."""
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return 0


def _alnum_count(text: str) -> int:
    return sum(1 for char in text if char.isalnum())


def _test_size(test: Test) -> int:
    if isinstance(test, StdinTest):
        return len(test.stdin)
    return len(json.dumps(test.args, default=str))


def trim_indices(sizes: Sequence[int]) -> list[int]:
    """Which tests to keep: all up to `MAX_TESTS`, else the 5 shortest and 15 longest.

    Returns:
        Indices into `sizes`, ascending.
    """
    if len(sizes) <= MAX_TESTS:
        return list(range(len(sizes)))
    by_size = sorted(range(len(sizes)), key=lambda index: (sizes[index], index))
    return sorted(by_size[:KEEP_SHORTEST] + by_size[-KEEP_LONGEST:])


def _split(count: int, *, public: int, seed: int, external_id: str) -> tuple[list[int], list[int]]:
    order = list(range(count))
    random.Random(f"{seed}:{external_id}").shuffle(order)
    chosen = max(0, min(public, count))
    return sorted(order[:chosen]), sorted(order[chosen:])


def _text_column(record: Mapping[str, Any], column: str) -> str:
    value = record.get(column)
    if not isinstance(value, str) or not value.strip():
        raise RowRejected(RULE_MALFORMED, f"missing column {column!r}")
    return value


def _optional_text(record: Mapping[str, Any], column: str) -> str | None:
    value = record.get(column)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return str(value)


def _external_id(record: Mapping[str, Any]) -> str | None:
    for column in ID_COLUMNS:
        value = _optional_text(record, column)
        if value is not None:
            return value
    question = record.get("question")
    if isinstance(question, str) and question.strip():
        return "q" + hashlib.sha256(question.encode("utf-8")).hexdigest()[:16]
    return None


def _tests(io: Any) -> tuple[list[Test], str | None, bool]:
    """The tests of `input_output`, its fn_name and whether call outputs were unwrapped."""
    if not isinstance(io, dict) or not all(
        isinstance(io.get(key), list) for key in ("inputs", "outputs")
    ):
        raise RowRejected(
            RULE_MALFORMED, "input_output must be a JSON object with lists 'inputs' and 'outputs'"
        )
    inputs, outputs = io["inputs"], io["outputs"]
    if len(inputs) != len(outputs):
        raise RowRejected(RULE_UNEQUAL_TESTS, f"{len(inputs)} inputs but {len(outputs)} outputs")
    if len(inputs) < MIN_TESTS:
        raise RowRejected(RULE_TOO_FEW_TESTS, f"{len(inputs)} tests, need at least {MIN_TESTS}")
    fn_name = io.get("fn_name") or None
    if fn_name is None:
        return [stdin_test(i, o) for i, o in zip(inputs, outputs, strict=True)], None, False
    if not isinstance(fn_name, str):
        raise RowRejected(RULE_MALFORMED, "input_output's fn_name must be a string")
    unwrap = is_wrapped_outputs(outputs)
    pairs = list(zip(inputs, outputs, strict=True))
    return list(call_tests(fn_name, pairs, unwrap=unwrap)), fn_name, unwrap


def _solutions(record: Mapping[str, Any]) -> list[str]:
    if record.get("solutions") is None:
        return []
    solutions = load_json_column(record, "solutions")
    if not isinstance(solutions, list) or not all(isinstance(s, str) for s in solutions):
        raise RowRejected(RULE_MALFORMED, "solutions must be a JSON list of programs")
    return solutions


def _verify(solutions: Sequence[str], tests: list[Test], executor: Executor) -> int:
    """The index of the first of the tried solutions that passes every test.

    Raises:
        RowRejected: (`unverified`) none does.
    """
    tried = solutions[:MAX_VERIFY_SOLUTIONS]
    for index, code in enumerate(tried):
        request = ExecuteRequest(code=code, tests=list(tests), stop_on_first_failure=True)
        try:
            response = executor.execute(request)
        except InvalidInput as exc:  # e.g. a test bigger than the executor accepts
            logger.info("reference solution %d refused by the executor: %s", index, exc)
            continue
        if response.passed == response.total:
            return index
    raise RowRejected(
        RULE_UNVERIFIED,
        f"no reference solution passes (tried {len(tried)} of {len(solutions)})",
    )


def _problem(record: Mapping[str, Any], *, external_id: str, options: ImportOptions) -> ProblemRow:
    statement = _text_column(record, "question")
    tests, fn_name, unwrapped = _tests(load_json_column(record, "input_output"))
    if mentions_image(statement) or _picture_count(record.get("picture_num")) > 0:
        raise RowRejected(RULE_IMAGE, "the statement refers to an image")
    alnum = _alnum_count(statement)
    if alnum < MIN_STATEMENT_ALNUM:
        raise RowRejected(
            RULE_SHORT_STATEMENT,
            f"{alnum} alphanumeric characters, need at least {MIN_STATEMENT_ALNUM}",
        )
    kept = [tests[index] for index in trim_indices([_test_size(test) for test in tests])]
    metadata: dict[str, Any] = {
        column: str(record[column]) for column in ("url", "source") if record.get(column)
    }
    metadata.update(tests_before=len(tests), tests_after=len(kept))
    if fn_name is not None:
        metadata["call_outputs_unwrapped"] = unwrapped
    if options.verify and options.executor is not None:  # read_problems demands one
        metadata["verified_by"] = _verify(_solutions(record), kept, options.executor)
    public, hidden = _split(
        len(kept), public=options.public_tests, seed=options.seed, external_id=external_id
    )
    return ProblemRow(
        external_id=external_id,
        statement=statement,
        starter_code=_optional_text(record, "starter_code") or "",
        test_style=TestStyle.CALL if fn_name is not None else TestStyle.STDIN,
        fn_name=fn_name,
        public_tests=[kept[index] for index in public],
        hidden_tests=[kept[index] for index in hidden],
        difficulty=_optional_text(record, "difficulty"),
        source_metadata=metadata,
    )


def _read(path: Path, options: ImportOptions) -> Iterator[ProblemRow | BadRow]:
    for number, record in read_records(path):
        if isinstance(record, BadRow):
            yield record
            continue
        external_id = _external_id(record)
        try:
            if external_id is None:
                raise RowRejected(RULE_MALFORMED, "missing column 'question'")
            yield _problem(record, external_id=external_id, options=options)
        except RowRejected as exc:
            yield BadRow(number, exc.reason, external_id=external_id)
        except ValidationError as exc:
            reason = f"{RULE_MALFORMED}: {validation_reason(exc)}"
            yield BadRow(number, reason, external_id=external_id)


def read_problems(path: Path, options: ImportOptions) -> Iterator[ProblemRow | BadRow]:
    """Read TACO rows from `path`, preprocessed as the module docstring describes.

    Args:
        path: A JSONL, JSON or Parquet file of TACO rows.
        options: `public_tests` and `seed` choose the split; `verify` runs reference
            solutions through `executor`.

    Returns:
        Each row as a problem, or as a BadRow naming the rule that dropped it.

    Raises:
        InvalidInput: `options.verify` is set without `options.executor`.
        CobaltError: while iterating with `verify`, the executor failed (`Unavailable`,
            `Overloaded`, `UpstreamError`): the import stops rather than drop problems
            it could not check. A request the executor refuses (`InvalidInput`) only
            counts as that solution failing.
    """
    if options.verify and options.executor is None:
        raise InvalidInput(
            "verifying TACO problems runs their reference solutions, so it needs an "
            "executor: pass ImportOptions(executor=ExecutorClient(...)) or turn verify off"
        )
    return _read(path, options)
