"""Which feedback a turn gets and what it shows (docs/method.md, Rollouts)."""

from __future__ import annotations

import pytest

from cobalt.executor.judge import judge
from cobalt.executor.sandbox import RawRun, SandboxJob
from cobalt.orchestrator.rollouts.feedback import (
    CHECK_PASSES,
    EMPTY_FIELD,
    FEEDBACK_FIELD_CHARS,
    FeedbackKind,
    failed_test_report,
    feedback_for_first_failure,
    feedback_kind,
    public_verdict_vector,
)
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.shared.contracts import (
    CallTest,
    Compare,
    ProgramTest,
    StdinTest,
    TestResult,
    Verdict,
)
from cobalt.shared.text import truncate_middle
from tests.support.runs import execute_response as response

TEMPLATE = PromptTemplate.load("default")
TESTS = [
    StdinTest(stdin="2", expected_stdout="4"),
    StdinTest(stdin="5", expected_stdout="10"),
    StdinTest(stdin="7", expected_stdout="14"),
]
PASSED = TestResult(verdict=Verdict.ACCEPTED, stdout="4\n")
WRONG = TestResult(verdict=Verdict.WRONG_ANSWER, exit_code=0, stdout="11\n")
CRASH = TestResult(
    verdict=Verdict.RUNTIME_ERROR,
    exit_code=1,
    stderr="Traceback (most recent call last):\nZeroDivisionError: division by zero\n",
)


def test_the_first_failing_test_in_test_order_is_reported() -> None:
    text = feedback_for_first_failure(TEMPLATE, TESTS, "code", response(PASSED, WRONG, CRASH))
    assert "wrong answer" in text
    assert "Input:\n5\n" in text and "\n11\n" in text and "\n10" in text
    assert "ZeroDivisionError" not in text  # only the first failure is shown


def test_a_crash_shows_the_error_output_instead_of_the_outputs() -> None:
    text = feedback_for_first_failure(TEMPLATE, TESTS, "code", response(CRASH, WRONG, PASSED))
    assert "runtime error (exit code 1)" in text
    assert "ZeroDivisionError: division by zero" in text
    assert "Expected output" not in text and "11" not in text
    killed = TestResult(verdict=Verdict.RUNTIME_ERROR, signal=9)
    assert "killed by signal 9" in failed_test_report(TESTS[0], killed).verdict


def test_a_timeout_shows_the_executors_explanation_when_nothing_was_printed() -> None:
    slow = TestResult(
        verdict=Verdict.TIME_LIMIT,
        feedback="Input:\n2\nExpected output:\n4\nTime limit exceeded (4 s).",
    )
    text = feedback_for_first_failure(TEMPLATE, TESTS, "code", response(slow, PASSED, PASSED))
    assert "time limit exceeded" in text and "Time limit exceeded (4 s)." in text
    assert failed_test_report(TESTS[0], slow).is_wrong_output is False


def test_all_passed_no_public_tests_and_no_code() -> None:
    everything = response(PASSED, PASSED, PASSED)
    assert feedback_for_first_failure(TEMPLATE, TESTS, "c", everything) == TEMPLATE.all_passed
    # A problem without public tests: nothing ran, and the feedback says so.
    untested = feedback_for_first_failure(TEMPLATE, [], "c", None)
    assert untested == TEMPLATE.no_public_tests and "No public test ran" in untested
    assert "passes" not in untested and "pass every" not in untested.lower()
    assert feedback_for_first_failure(TEMPLATE, TESTS, None, None) == TEMPLATE.no_code
    assert "edge cases" in TEMPLATE.all_passed and "code block" in TEMPLATE.no_code


def test_feedback_kind_and_verdict_vector() -> None:
    assert feedback_kind(None, response(WRONG)) is FeedbackKind.NO_CODE
    assert feedback_kind("c", None) is FeedbackKind.NO_PUBLIC_TESTS
    assert feedback_kind("c", response(PASSED)) is FeedbackKind.ALL_PASSED
    assert feedback_kind("c", response(PASSED, CRASH)) is FeedbackKind.FAILED_TEST
    assert public_verdict_vector(response(PASSED, WRONG, CRASH)) == [
        "accepted",
        "wrong_answer",
        "runtime_error",
    ]
    assert public_verdict_vector(None) == []


@pytest.mark.parametrize("verdict", [Verdict.SKIPPED, Verdict.SANDBOX_ERROR])
def test_a_test_nobody_saw_pass_is_never_reported_as_passed(verdict: Verdict) -> None:
    unjudged = TestResult(verdict=verdict, feedback="stopped: the request's time budget ran out")
    text = feedback_for_first_failure(TEMPLATE, TESTS, "c", response(PASSED, unjudged, PASSED))
    assert text != TEMPLATE.all_passed and "time budget ran out" in text


def test_each_field_is_middle_truncated_to_400_characters() -> None:
    test = StdinTest(stdin="i" * 5000, expected_stdout="e" * FEEDBACK_FIELD_CHARS)
    wrong = TestResult(verdict=Verdict.WRONG_ANSWER, stdout="o" * (FEEDBACK_FIELD_CHARS + 1))
    report = failed_test_report(test, wrong)
    assert report.input == truncate_middle("i" * 5000, FEEDBACK_FIELD_CHARS)
    assert report.output == truncate_middle("o" * 401, FEEDBACK_FIELD_CHARS)
    assert report.expected == "e" * FEEDBACK_FIELD_CHARS  # fits: left whole
    assert len(report.input) <= FEEDBACK_FIELD_CHARS and "omitted" in report.input
    assert "omitted" in report.output
    text = feedback_for_first_failure(TEMPLATE, [test], "c", response(wrong))
    assert report.input in text and report.output in text and "i" * 400 not in text
    crash = TestResult(verdict=Verdict.RUNTIME_ERROR, exit_code=1, stderr="E" * 5000)
    assert failed_test_report(test, crash).error == truncate_middle("E" * 5000, 400)
    assert len(failed_test_report(test, wrong, field_chars=50).input) <= 50


def test_empty_fields_are_shown_as_empty() -> None:
    silent = TestResult(verdict=Verdict.WRONG_ANSWER, stdout="")
    report = failed_test_report(StdinTest(stdin="", expected_stdout="1\n"), silent)
    assert (report.input, report.output, report.expected) == (EMPTY_FIELD, EMPTY_FIELD, "1")


def test_results_must_line_up_with_the_public_tests() -> None:
    with pytest.raises(ValueError, match="2 results for 3 public tests"):
        feedback_for_first_failure(TEMPLATE, TESTS, "c", response(PASSED, WRONG))
    with pytest.raises(ValueError, match="pass their results"):
        feedback_for_first_failure(TEMPLATE, TESTS, "c", None)


def _judged_call(test: CallTest, record: bytes) -> TestResult:
    """A call test's result as the real executor judge writes it."""
    raw = RawRun(nonce="n1", status=0, record=b"n1 start\n" + record, started=True)
    job = SandboxJob(code="", mode="call", fn_name=test.fn_name)
    return judge(test, job, raw, compare=Compare.COBALT, feedback_chars=400, stream_chars=4096)


def test_call_tests_show_the_call_and_python_values() -> None:
    test = CallTest(fn_name="pick", args=[1, [2, 3], "a"], kwargs={"strict": True}, expected=None)
    returned = _judged_call(test, b'n1 {"status": "returned"}\n[true, null, "a"]')
    assert returned.verdict == Verdict.WRONG_ANSWER and returned.stdout == ""
    report = failed_test_report(test, returned)
    assert report.input == "pick(1, [2, 3], 'a', strict=True)"
    assert report.expected == "None"
    assert report.output == "[True, None, 'a']"  # the returned value, not the empty stdout
    text = feedback_for_first_failure(TEMPLATE, [test], "c", response(returned))
    assert "pick(1, [2, 3], 'a', strict=True)" in text and "[True, None, 'a']" in text


def test_a_call_to_a_missing_function_shows_the_executors_explanation() -> None:
    test = CallTest(fn_name="pick", args=[], expected=1)
    missing = _judged_call(test, b'n1 {"status": "missing"}\n')
    report = failed_test_report(test, missing)
    assert report.verdict == "runtime error" and "no function 'pick'" in report.error


def test_a_checking_program_shows_its_checks_and_what_its_last_call_returned() -> None:
    test = ProgramTest(check="assert add(1, 2) == 3")
    failed = TestResult(verdict=Verdict.WRONG_ANSWER, stdout="debug\n", returned="4")
    report = failed_test_report(test, failed)
    assert report.input == "assert add(1, 2) == 3"
    assert report.expected == CHECK_PASSES and "COBALT-CHECK-PASSED" not in report.expected
    assert report.output == "4"
    assert failed_test_report(test, failed.model_copy(update={"returned": None})).output == "debug"
