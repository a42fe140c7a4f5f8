"""What a turn keeps of each test, and how a stored test is shown (issue 35: returned values)."""

from __future__ import annotations

from cobalt.orchestrator.rollouts.feedback import RETURN_VALUE_LABEL
from cobalt.orchestrator.rollouts.program_outputs import shown_tests, stored_outputs
from cobalt.shared.contracts import TestResult, Verdict
from tests.support.runs import execute_response as _response

CALL = {"fn_name": "add", "args": [1, 2], "expected": 3}


def test_a_wrong_call_shows_its_returned_value_as_actual_output_and_no_error() -> None:
    wrong = TestResult(
        verdict=Verdict.WRONG_ANSWER, returned=[4, None], feedback="Wrong answer on add(1, 2)"
    )
    outputs = stored_outputs(_response(wrong))
    assert outputs is not None and outputs[0]["returned"] == [4, None]  # kept with the turn
    (detail,) = shown_tests("public", [CALL], ["wrong_answer"], outputs)
    assert detail.actual == "[4, None]"  # the structured value, as Python
    assert detail.error == ""  # a wrong answer is not an error


def test_a_turn_stored_before_returned_values_reads_the_value_from_its_feedback() -> None:
    legacy = {"stdout": "", "stderr": "", "feedback": f"Wrong.\n{RETURN_VALUE_LABEL}[4, null]"}
    (detail,) = shown_tests("public", [CALL], ["wrong_answer"], [legacy])
    assert detail.actual == "[4, None]"


def test_a_runtime_error_keeps_its_error() -> None:
    failed = TestResult(verdict=Verdict.RUNTIME_ERROR, stderr="ZeroDivisionError: division")
    (detail,) = shown_tests("public", [CALL], ["runtime_error"], stored_outputs(_response(failed)))
    assert detail.error is not None and "ZeroDivisionError" in detail.error
