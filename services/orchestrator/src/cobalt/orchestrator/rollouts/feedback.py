"""The user message that follows a turn: feedback on its program from the public tests.

docs/method.md: the first failing public test in test order, with its input, the program's
output and the expected output, or the error output for a crash (each field middle-
truncated to 400 characters); a message saying all public tests pass; a message saying
that no public test ran, for a problem without one (never "passes every public test");
or, when the answer had no code block, a message asking for one. This module decides which
of the four a turn gets and what the fields hold; the words come from the run's `PromptTemplate`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from enum import StrEnum

from cobalt.orchestrator.rollouts.prompts import FailedTestReport, PromptTemplate
from cobalt.shared.contracts import (
    CallTest,
    ExecuteResponse,
    ProgramTest,
    StdinTest,
    StoredTest,
    TestResult,
    Verdict,
)
from cobalt.shared.text import truncate_middle

__all__ = [
    "CHECK_PASSES",
    "EMPTY_FIELD",
    "FEEDBACK_FIELD_CHARS",
    "FeedbackKind",
    "RETURN_VALUE_LABEL",
    "failed_test_report",
    "feedback_for_first_failure",
    "feedback_kind",
    "first_failure",
    "public_verdict_vector",
    "shown_input",
]

FEEDBACK_FIELD_CHARS = 400
"""Each feedback field is middle-truncated to this many characters (docs/method.md)."""

EMPTY_FIELD = "(empty)"
"""Shown for a field with no text, so "printed nothing" cannot be mistaken for a glitch."""

RETURN_VALUE_LABEL = "Your return value:\n"
"""The executor's feedback puts a call test's returned value after this label.

`TestResult` has no field for the value a call returned (its `stdout` is what the program
printed), so for a call-style wrong answer the value is read back from the executor's
feedback text (`cobalt.executor.judge`); a test pins the two together.
"""

CHECK_PASSES = "the check runs to its end with no assertion failing"
"""What a checking program (`ProgramTest`) expects, shown where a test's expected output goes."""

_VERDICT_LABELS = {
    Verdict.ACCEPTED: "accepted",
    Verdict.WRONG_ANSWER: "wrong answer",
    Verdict.RUNTIME_ERROR: "runtime error",
    Verdict.TIME_LIMIT: "time limit exceeded",
    Verdict.MEMORY_LIMIT: "memory limit exceeded",
    Verdict.OUTPUT_LIMIT: "output limit exceeded",
    Verdict.SANDBOX_ERROR: "the sandbox failed to run it",
    Verdict.SKIPPED: "not run",
    Verdict.COMPILE_ERROR: "compile error",
}


class FeedbackKind(StrEnum):
    """Which of the four feedback messages a turn gets."""

    NO_CODE = "no_code"
    ALL_PASSED = "all_passed"
    FAILED_TEST = "failed_test"
    NO_PUBLIC_TESTS = "no_public_tests"
    """The problem has no public test: the program ran on nothing."""


def public_verdict_vector(response: ExecuteResponse | None) -> list[str]:
    """The public tests' verdicts in test order, as stored with a turn ([] if not run)."""
    return [] if response is None else [str(result.verdict) for result in response.results]


def first_failure(response: ExecuteResponse) -> int | None:
    """Position of the first test, in test order, that was not accepted; None if none.

    A test that was not run (skipped) or not judged (sandbox error) counts as not
    accepted: the feedback never tells the model a test passed that nobody saw pass.
    """
    for position, result in enumerate(response.results):
        if result.verdict != Verdict.ACCEPTED:
            return position
    return None


def feedback_kind(code: str | None, response: ExecuteResponse | None) -> FeedbackKind:
    """Which feedback a turn gets, from its program and the public tests' results.

    Args:
        code: The extracted program; None when the answer had no code block.
        response: The public tests' results; None when the problem has no public tests.
    """
    if code is None:
        return FeedbackKind.NO_CODE
    if response is None:
        return FeedbackKind.NO_PUBLIC_TESTS
    if first_failure(response) is None:
        return FeedbackKind.ALL_PASSED
    return FeedbackKind.FAILED_TEST


def shown_input(test: StoredTest) -> str:
    """How a test's input is shown: stdin as is, a call as `fn(args)`, a check as code."""
    if isinstance(test, StdinTest):
        return test.stdin
    if isinstance(test, CallTest):
        arguments = [repr(arg) for arg in test.args]
        arguments += [f"{name}={value!r}" for name, value in test.kwargs.items()]
        return f"{test.fn_name}({', '.join(arguments)})"
    return test.check


def _expected_text(test: StoredTest) -> str:
    if isinstance(test, StdinTest):
        return test.expected_stdout
    if isinstance(test, CallTest):
        return repr(test.expected)
    # A checking program passes when its check runs to the end (the executor runs it).
    return CHECK_PASSES


def _executor_detail(result: TestResult) -> str:
    """The executor's one-line explanation, the last line of its feedback.

    The executor ends a failing test's feedback with what went wrong ("Time limit exceeded
    (4 s).", "Error (no function 'f' and no class Solution with that method)").
    """
    lines = [line for line in result.feedback.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def _returned_value(result: TestResult) -> str | None:
    """The value a call test returned, shown as Python (None when the executor gave none).

    The executor's structured `returned` value first; turns stored before it existed keep
    the value only inside the feedback text, so that is read as the fallback."""
    if result.returned is not None:
        return repr(result.returned)
    _, label, value = result.feedback.rpartition(RETURN_VALUE_LABEL)
    if not label:
        return None
    try:
        return repr(json.loads(value))
    except ValueError:  # cut by the executor's own truncation: show it as it came
        return value


def _output_text(test: StoredTest, result: TestResult) -> str:
    if isinstance(test, CallTest) and result.verdict == Verdict.WRONG_ANSWER:
        returned = _returned_value(result)
        return returned if returned is not None else _executor_detail(result)
    if isinstance(test, ProgramTest) and isinstance(result.returned, str):
        return result.returned  # what the check's last call of the program returned
    return result.stdout


def _error_text(result: TestResult) -> str:
    """The error output: stderr, else the executor's explanation (a timeout prints none)."""
    return result.stderr if result.stderr.strip() else _executor_detail(result)


def _verdict_text(result: TestResult) -> str:
    label = _VERDICT_LABELS[result.verdict]
    if result.verdict != Verdict.RUNTIME_ERROR:
        return label
    if result.signal is not None:
        return f"{label} (killed by signal {result.signal})"
    if result.exit_code not in (None, 0):
        return f"{label} (exit code {result.exit_code})"
    return label


def _field(text: str, field_chars: int) -> str:
    shown = text.rstrip("\n")
    return truncate_middle(shown, field_chars) if shown else EMPTY_FIELD


def failed_test_report(
    test: StoredTest, result: TestResult, *, field_chars: int = FEEDBACK_FIELD_CHARS
) -> FailedTestReport:
    """The fields the feedback shows for one failing test, each cut to `field_chars`.

    A call test's input is the call (`add(1, [2, 3])`) and its expected and returned
    values are shown as Python literals (repr, not JSON: `True`, `None`, `'a'`), so they
    read like the code under test.
    """
    return FailedTestReport(
        verdict=_verdict_text(result),
        input=_field(shown_input(test), field_chars),
        output=_field(_output_text(test, result), field_chars),
        expected=_field(_expected_text(test), field_chars),
        error=_field(_error_text(result), field_chars),
        is_wrong_output=result.verdict == Verdict.WRONG_ANSWER,
    )


def feedback_for_first_failure(
    template: PromptTemplate,
    public_tests: Sequence[StoredTest],
    code: str | None,
    response: ExecuteResponse | None,
    *,
    field_chars: int = FEEDBACK_FIELD_CHARS,
) -> str:
    """The next user message for a turn whose program was `code`.

    Args:
        template: The run's prompt template (all the wording).
        public_tests: The problem's public tests, in the dataset's order.
        code: The extracted program; None when the answer had no code block.
        response: The public tests' results in the same order (one per test); None when
            the problem has no public tests (`template.no_public_tests`).
        field_chars: Middle-truncation length of each shown field.

    Returns:
        `template.no_code`, `template.no_public_tests`, `template.all_passed`, or the
        report of the first failing public test wrapped by the template.

    Raises:
        ValueError: `response` does not hold exactly one result per public test, or is
            missing although there are public tests: the feedback would name the wrong
            test.
    """
    if response is None and public_tests and code is not None:
        raise ValueError("the program has public tests to fail; pass their results")
    if response is not None and len(response.results) != len(public_tests):
        raise ValueError(
            f"{len(response.results)} results for {len(public_tests)} public tests; "
            "results must be in public-test order, one per test"
        )
    if code is None:
        return template.no_code
    if response is None:
        return template.no_public_tests
    if (position := first_failure(response)) is None:
        return template.all_passed
    report = failed_test_report(
        public_tests[position], response.results[position], field_chars=field_chars
    )
    return template.feedback_message(report)
