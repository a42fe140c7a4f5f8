"""The user message that follows a turn: feedback on its program from the public tests.

METHOD.md: the first failing public test in test order, with its input, the program's
output and the expected output, or the error output for a crash (each field middle-
truncated to 400 characters); a message saying all public tests pass; or, when the answer
had no code block, a message asking for one. The wording comes from the run's template.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.shared.contracts import (
    CallTest,
    ExecuteResponse,
    StdinTest,
    StoredTest,
    TestResult,
    Verdict,
)
from cobalt.shared.text import truncate_middle

__all__ = ["FIELD_CHARS", "feedback_for_first_failure", "first_failure", "test_input_text"]

FIELD_CHARS = 400
"""Each feedback field is middle-truncated to this many characters (METHOD.md)."""

_VERDICT_NAMES = {
    Verdict.WRONG_ANSWER: "wrong answer",
    Verdict.RUNTIME_ERROR: "runtime error",
    Verdict.TIME_LIMIT: "time limit exceeded",
    Verdict.MEMORY_LIMIT: "memory limit exceeded",
    Verdict.OUTPUT_LIMIT: "output limit exceeded",
}


def _literal(value: object) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def test_input_text(test: StoredTest) -> str:
    """How a test's input is shown: stdin as is, a call as `fn(args)`, a check as code."""
    if isinstance(test, StdinTest):
        return test.stdin
    if isinstance(test, CallTest):
        args = [_literal(a) for a in test.args]
        args += [f"{k}={_literal(v)}" for k, v in test.kwargs.items()]
        return f"{test.fn_name}({', '.join(args)})"
    return test.check


def _expected_text(test: StoredTest) -> str:
    if isinstance(test, StdinTest):
        return test.expected_stdout
    if isinstance(test, CallTest):
        return _literal(test.expected)
    return "the checks above to pass"


def first_failure(response: ExecuteResponse) -> int | None:
    """Position of the first test that did not pass, or None if all passed."""
    for position, result in enumerate(response.results):
        if result.verdict != Verdict.ACCEPTED:
            return position
    return None


def _error_text(result: TestResult) -> str:
    if result.stderr.strip():
        return result.stderr
    if result.verdict == Verdict.TIME_LIMIT:
        return "The program did not finish within the time limit."
    if result.verdict == Verdict.MEMORY_LIMIT:
        return "The program used more memory than allowed."
    return result.feedback or f"The program stopped with exit code {result.exit_code}."


def feedback_for_first_failure(
    template: PromptTemplate,
    public_tests: Sequence[StoredTest],
    code: str | None,
    response: ExecuteResponse | None,
) -> str:
    """The next user message for a turn whose program was `code` (None: no code block).

    `response` holds the public tests' results in test order (None when the problem has
    no public tests, which counts as all passed).
    """
    if code is None:
        return template.no_code
    position = first_failure(response) if response is not None else None
    if position is None:
        return template.all_passed
    assert response is not None
    test, result = public_tests[position], response.results[position]
    fields = {
        "verdict": _VERDICT_NAMES.get(result.verdict, str(result.verdict)),
        "input": truncate_middle(test_input_text(test), FIELD_CHARS),
        "output": truncate_middle(result.stdout, FIELD_CHARS),
        "expected": truncate_middle(_expected_text(test), FIELD_CHARS),
        "error": truncate_middle(_error_text(result), FIELD_CHARS),
    }
    wrong_output = result.verdict == Verdict.WRONG_ANSWER
    return (template.failed_test if wrong_output else template.crashed_test).format(**fields)
