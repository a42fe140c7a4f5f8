"""What a program did on each test, kept with its turn, and shown next to the test.

The executor returns, per test, the program's stdout and stderr (each capped at the
request's `stream_chars`), its exit code or signal, wall time and a feedback line. A turn
stores exactly that per public test when it is rolled out and per hidden test when it is
evaluated (`Turn.public_outputs`, `Turn.hidden_outputs`), so the input, the expected
output, the actual output and the error of any verdict can be shown later without running
the program again. Showing a test reuses the feedback's own formatting
(`feedback.failed_test_report`): a call test reads as a Python call, its values as Python.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import TypeAdapter, ValidationError

from cobalt.orchestrator.rollouts.feedback import failed_test_report
from cobalt.shared.contracts import ExecuteResponse, StoredTest, TestResult, Verdict
from cobalt.shared.contracts.browse import TestCaseDetail

__all__ = ["SHOWN_FIELD_CHARS", "STORED_FIELDS", "shown_tests", "stored_outputs"]

STORED_FIELDS = ("stdout", "stderr", "exit_code", "signal", "wall_ms", "feedback", "returned")
"""The `TestResult` fields a turn keeps per test (the verdict is in its verdict list)."""

SHOWN_FIELD_CHARS = 4096
"""Input and expected output are middle-truncated to this many characters when shown,
the executor's default cap on stdout and stderr (`ExecuteRequest.stream_chars`): a test
with megabytes of input must not make a page of megabytes."""

_TESTS = TypeAdapter(list[StoredTest])


def stored_outputs(response: ExecuteResponse | None) -> list[dict[str, Any]] | None:
    """The per-test record a turn stores (None: nothing ran)."""
    if response is None:
        return None
    return [result.model_dump(include=set(STORED_FIELDS)) for result in response.results]


def shown_tests(
    kind: str,
    tests: Sequence[dict[str, Any]],
    verdicts: Sequence[str] | None,
    outputs: Sequence[dict[str, Any]] | None,
) -> list[TestCaseDetail]:
    """Each test with its input, expected output and, where stored, the program's output.

    `verdicts` None: not run (hidden tests before evaluation); `outputs` None: the turn was
    written before outputs were stored, or nothing ran (no program).
    """
    try:
        parsed = _TESTS.validate_python(list(tests))
    except ValidationError:  # a test the contracts no longer accept: show it as stored
        parsed = None
    details = []
    for index, raw in enumerate(tests):
        verdict = verdicts[index] if verdicts is not None and index < len(verdicts) else None
        output = outputs[index] if outputs is not None and index < len(outputs) else None
        if parsed is None:
            details.append(TestCaseDetail(kind=kind, index=index, verdict=verdict, input=str(raw)))
            continue
        result = TestResult(verdict=Verdict(verdict or Verdict.SKIPPED), **(output or {}))
        report = failed_test_report(parsed[index], result, field_chars=SHOWN_FIELD_CHARS)
        details.append(
            TestCaseDetail(
                kind=kind,
                index=index,
                verdict=verdict,
                input=report.input,
                expected=report.expected,
                actual=report.output if output is not None else None,
                error=_error_shown(result, report.error) if output is not None else None,
                exit_code=result.exit_code if output is not None else None,
                wall_ms=result.wall_ms if output is not None else None,
            )
        )
    return details


def _error_shown(result: TestResult, reported: str) -> str:
    """The Error box: a wrong answer without stderr has none (its returned value or output
    is in Actual output, not an error)."""
    if result.verdict == Verdict.WRONG_ANSWER and not result.stderr.strip():
        return ""
    return reported
