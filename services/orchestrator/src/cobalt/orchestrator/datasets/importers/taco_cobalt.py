"""The TACO-Cobalt rows the Cobalt paper released: TACO problems already preprocessed and
split into public and hidden tests. The split is kept as given (never re-split), and no
TACO filtering rule is applied again.

Column names differ between releases, so each role accepts the columns below; the first
one present (not null, not an empty string) wins. A row with none of a required role's
columns is a BadRow (`malformed: missing column: one of ...`).

- id (required): `id`, `problem_id`, `task_id`, `question_id`.
- statement (required): `instruction`, `question`, `problem`, `statement`.
- public tests (required): `public_test_cases`, `public_tests`, `public_input_output`.
- hidden tests (required): `private_test_cases`, `hidden_test_cases`, `private_tests`,
  `hidden_tests`, `input_output`. When `input_output` is the hidden column and it contains
  every public test, it is the whole suite and the hidden tests are the rest; otherwise it
  is the hidden tests as they are.
- `fn_name` (optional): makes the problem call-based; a `"fn_name"` key inside a test
  object (TACO's `input_output` shape) counts too.
- `starter_code`, `difficulty`, `url`, `source` (optional).

A test column holds JSON text (or, from Parquet, the decoded value) in one of two shapes:

- TACO's `{"inputs": [...], "outputs": [...]}` (optionally with `"fn_name"`): the lists
  hold the values themselves;
- a list of `{"input": ..., "output": ...}` objects (other keys such as `testtype` are
  ignored): for call-based problems the values are JSON text and are decoded.

Stdin tests: a list-valued input or output is a list of lines, joined with newlines.

Call tests: an input is the list of arguments (TACO's shape, `[1, 2]` calls `f(1, 2)`);
a value that is not a list is the single argument; JSON text that is several JSON values
on separate lines is one argument per line. Outputs are unwrapped when every output of
the problem, public and hidden, is a one-element list (TACO wraps return values as
`[value]`); otherwise each output is the return value itself. JSON text that does not
decode is taken as a string. `source_metadata["call_outputs_unwrapped"]` records the
choice, and `source_metadata["columns"]` which column filled each role.

Rules (the reason's prefix): `malformed` (missing column, bad JSON, wrong shape, no
tests at all, or not a valid problem) and `unequal_tests` (`inputs` and `outputs` differ
in length).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cobalt.orchestrator.datasets.importers.taco import (
    RULE_MALFORMED,
    RULE_UNEQUAL_TESTS,
    RowRejected,
    call_tests,
    is_wrapped_outputs,
    load_json_column,
    stdin_test,
)
from cobalt.orchestrator.datasets.importing import ImportOptions, validation_reason
from cobalt.orchestrator.datasets.records import BadRow, read_records
from cobalt.shared.contracts import CallTest, ProblemRow, StdinTest, TestStyle

__all__ = [
    "HIDDEN_COLUMNS",
    "ID_COLUMNS",
    "PUBLIC_COLUMNS",
    "STATEMENT_COLUMNS",
    "read_problems",
]

ID_COLUMNS = ("id", "problem_id", "task_id", "question_id")
STATEMENT_COLUMNS = ("instruction", "question", "problem", "statement")
PUBLIC_COLUMNS = ("public_test_cases", "public_tests", "public_input_output")
HIDDEN_COLUMNS = (
    "private_test_cases",
    "hidden_test_cases",
    "private_tests",
    "hidden_tests",
    "input_output",
)
FULL_SUITE_COLUMN = "input_output"

Test = StdinTest | CallTest


@dataclass
class _Block:
    """One test column, read but not yet turned into tests."""

    column: str
    pairs: list[tuple[Any, Any]]
    encoded: bool
    """Values are JSON text (the list-of-objects shape)."""
    fn_name: str | None


def _is_present(value: Any) -> bool:
    return value is not None and not (isinstance(value, str) and not value.strip())


def _column(record: Mapping[str, Any], columns: Sequence[str]) -> str:
    for column in columns:
        if _is_present(record.get(column)):
            return column
    raise RowRejected(RULE_MALFORMED, f"missing column: one of {', '.join(columns)}")


def _block(record: Mapping[str, Any], column: str) -> _Block:
    value = load_json_column(record, column)
    if (
        isinstance(value, dict)
        and isinstance(value.get("inputs"), list)
        and isinstance(value.get("outputs"), list)
    ):
        inputs, outputs = value["inputs"], value["outputs"]
        if len(inputs) != len(outputs):
            raise RowRejected(
                RULE_UNEQUAL_TESTS, f"{column}: {len(inputs)} inputs but {len(outputs)} outputs"
            )
        fn_name = value.get("fn_name") or None
        if fn_name is not None and not isinstance(fn_name, str):
            raise RowRejected(RULE_MALFORMED, f"{column}: fn_name must be a string")
        return _Block(column, list(zip(inputs, outputs, strict=True)), False, fn_name)
    if isinstance(value, list) and all(
        isinstance(test, dict) and "input" in test and "output" in test for test in value
    ):
        return _Block(column, [(test["input"], test["output"]) for test in value], True, None)
    raise RowRejected(
        RULE_MALFORMED,
        f"column {column!r} must hold {{'inputs': [...], 'outputs': [...]}} "
        "or a list of {'input': ..., 'output': ...} objects",
    )


def _decode_input(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        pass
    try:
        return [json.loads(line) for line in value.splitlines() if line.strip()]
    except ValueError as exc:
        raise RowRejected(RULE_MALFORMED, f"call input is not JSON: {value[:60]!r}") from exc


def _decode_output(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _call_pairs(block: _Block) -> list[tuple[Any, Any]]:
    if not block.encoded:
        return block.pairs
    return [(_decode_input(i), _decode_output(o)) for i, o in block.pairs]


def _without(tests: list[Test], removed: list[Test]) -> list[Test] | None:
    """`tests` minus one occurrence of each of `removed`; None if one is missing."""
    rest = list(tests)
    for test in removed:
        if test not in rest:
            return None
        rest.remove(test)
    return rest


def _problem(record: Mapping[str, Any], *, external_id: str) -> ProblemRow:
    statement_column = _column(record, STATEMENT_COLUMNS)
    public_block = _block(record, _column(record, PUBLIC_COLUMNS))
    hidden_block = _block(record, _column(record, HIDDEN_COLUMNS))
    fn_name = (
        str(record["fn_name"])
        if _is_present(record.get("fn_name"))
        else public_block.fn_name or hidden_block.fn_name
    )
    metadata: dict[str, Any] = {
        "columns": {
            "statement": statement_column,
            "public_tests": public_block.column,
            "hidden_tests": hidden_block.column,
        }
    }
    public: list[Test]
    hidden: list[Test]
    if fn_name is None:
        public = [stdin_test(i, o) for i, o in public_block.pairs]
        hidden = [stdin_test(i, o) for i, o in hidden_block.pairs]
    else:
        public_pairs, hidden_pairs = _call_pairs(public_block), _call_pairs(hidden_block)
        unwrap = is_wrapped_outputs([o for _, o in public_pairs + hidden_pairs])
        public = list(call_tests(fn_name, public_pairs, unwrap=unwrap))
        hidden = list(call_tests(fn_name, hidden_pairs, unwrap=unwrap))
        metadata["call_outputs_unwrapped"] = unwrap
    if hidden_block.column == FULL_SUITE_COLUMN:
        rest = _without(hidden, public)
        metadata["hidden_is_full_suite_minus_public"] = rest is not None
        hidden = hidden if rest is None else rest
    if not public and not hidden:
        raise RowRejected(RULE_MALFORMED, "the row has no tests")
    metadata.update(
        {column: str(record[column]) for column in ("url", "source") if record.get(column)}
    )
    starter_code = record.get("starter_code")
    difficulty = record.get("difficulty")
    return ProblemRow(
        external_id=external_id,
        statement=str(record[statement_column]),
        starter_code=starter_code if isinstance(starter_code, str) else "",
        test_style=TestStyle.CALL if fn_name is not None else TestStyle.STDIN,
        fn_name=fn_name,
        public_tests=list(public),
        hidden_tests=list(hidden),
        difficulty=str(difficulty) if _is_present(difficulty) else None,
        source_metadata=metadata,
    )


def read_problems(path: Path, options: ImportOptions) -> Iterator[ProblemRow | BadRow]:
    """Read TACO-Cobalt rows from `path`, keeping their public/hidden split.

    Args:
        path: A JSONL, JSON or Parquet file of TACO-Cobalt rows.
        options: Unused: the rows are already preprocessed and split.

    Yields:
        Each row as a problem, or as a BadRow whose reason names the missing column or
        the broken rule.
    """
    for number, record in read_records(path):
        if isinstance(record, BadRow):
            yield record
            continue
        external_id: str | None = None
        try:
            external_id = str(record[_column(record, ID_COLUMNS)])
            yield _problem(record, external_id=external_id)
        except RowRejected as exc:
            yield BadRow(number, exc.reason, external_id=external_id)
        except ValidationError as exc:
            reason = f"{RULE_MALFORMED}: {validation_reason(exc)}"
            yield BadRow(number, reason, external_id=external_id)
