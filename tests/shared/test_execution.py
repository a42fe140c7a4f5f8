"""A program on a problem's stored tests, through the real executor, verdicts in test order."""

from __future__ import annotations

import pytest

from cobalt.shared.clients import ExecutorClient
from cobalt.shared.contracts import CallTest, ProgramTest, StdinTest, Verdict
from cobalt.shared.execution import merge_responses, plan_requests

PROGRAM = """
import sys


def double(x):
    return 2 * x


data = sys.stdin.read().split()
if data:
    print(double(int(data[0])))
"""

TESTS = [
    StdinTest(stdin="2", expected_stdout="4"),
    ProgramTest(check="assert double(5) == 10\n"),
    CallTest(fn_name="double", args=[3], expected=7),  # wrong on purpose
    ProgramTest(check="assert double(1) == 3\n"),  # wrong on purpose
    StdinTest(stdin="21", expected_stdout="42"),
]


def test_mixed_tests_come_back_in_stored_order(executor_url: str) -> None:
    planned = plan_requests(PROGRAM, TESTS)
    assert [p.positions for p in planned] == [(0, 1, 2, 3, 4)]  # checks run in the executor
    with ExecutorClient(base_url=executor_url) as executor:
        responses = [executor.execute(p.request) for p in planned]
    merged = merge_responses(planned, responses)
    assert [r.verdict for r in merged.results] == [
        Verdict.ACCEPTED,
        Verdict.ACCEPTED,
        Verdict.WRONG_ANSWER,
        Verdict.WRONG_ANSWER,  # a failed assert is a failed test, not a crash
        Verdict.ACCEPTED,
    ]
    assert (merged.passed, merged.total) == (3, 5)


def test_plan_needs_tests_and_merge_checks_shapes() -> None:
    with pytest.raises(ValueError, match="at least one test"):
        plan_requests("pass", [])
    planned = plan_requests("pass", [StdinTest(stdin="", expected_stdout="")])
    with pytest.raises(ValueError, match="responses"):
        merge_responses(planned, [])
