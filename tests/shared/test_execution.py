"""A program on a problem's stored tests, through the real executor, verdicts in test order."""

from __future__ import annotations

import asyncio

import pytest

from cobalt.shared.clients import AsyncExecutorClient, ExecutorClient
from cobalt.shared.clients.base import RetryPolicy
from cobalt.shared.contracts import CallTest, ProgramTest, StdinTest, Verdict
from cobalt.shared.execution import (
    JudgedPrograms,
    judge_programs,
    merge_responses,
    plan_requests,
    unjudged_verdicts,
)
from tests.fakes.flaky_executor import FlakyExecutor, serve_flaky_executor

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


def test_programs_the_sandbox_cannot_judge_are_re_run_then_reported_unjudged(
    executor_url: str,
) -> None:
    right, wrong = "print(2 * int(input()))", "print(int(input()) + 1)"
    tests = [StdinTest(stdin="2", expected_stdout="4"), StdinTest(stdin="3", expected_stdout="6")]

    async def judge(url: str, retries: int) -> JudgedPrograms:
        client = AsyncExecutorClient(base_url=url, retry=RetryPolicy(max_retries=0))
        try:
            return await judge_programs(client, [right, None, wrong], tests, retries=retries)
        finally:
            await client.close()

    flaky = FlakyExecutor(executor_url, marker="+ 1", failures=1)
    with serve_flaky_executor(flaky) as url:
        judged = asyncio.run(judge(url, retries=1))  # failed once, judged on the re-run
        assert judged.unjudged == frozenset() and judged.retried == 1
        assert judged.responses[2].passed == 0 and judged.responses[0].passed == 2
        assert 1 not in judged.responses  # no program: nothing to judge, nothing masked
        flaky.failures = None
        judged = asyncio.run(judge(url, retries=2))
        assert judged.unjudged == {2} and sorted(judged.responses) == [0]
        # An executor call that fails judges nothing: every program is unjudged, not failed.
        flaky.down = True
        judged = asyncio.run(judge(url, retries=1))
        assert judged.unjudged == {0, 2} and judged.responses == {}
    assert not unjudged_verdicts(["accepted", "wrong_answer"])
    assert unjudged_verdicts(["accepted", "sandbox_error"])
