"""What a program holds in the server while it waits and runs, for admission, and the
calls an `lcb` test replays (which make that quadratic in a request's first tests).
"""

from __future__ import annotations

from typing import Any

from cobalt.executor.value_budget import CALL_VALUE_OVERHEAD, call_test_json_bytes
from cobalt.executor.values import dumps_value
from cobalt.shared.contracts import Compare
from cobalt.shared.contracts.executor import (
    CallTest,
    ExecuteRequest,
    ProgramTest,
    StdinTest,
    TestCase,
)

__all__ = ["LCB_REPLAYED_TESTS", "lcb_prior_calls", "request_bytes"]


LCB_REPLAYED_TESTS = 256
"""Under `lcb`, a call test among the first this many of its request repeats the calls
before it (LiveCodeBench's one instance per problem); later ones start fresh."""


def lcb_prior_calls(test: TestCase, request: ExecuteRequest) -> str:
    """JSON [args, kwargs] of the call tests before `test` in `request` (by identity)."""
    prior: list[list[Any]] = []
    for earlier in request.tests[:LCB_REPLAYED_TESTS]:
        if earlier is test:
            return dumps_value(prior)
        if isinstance(earlier, CallTest) and isinstance(test, CallTest):
            if earlier.fn_name == test.fn_name:
                prior.append([earlier.args, earlier.kwargs])
    return "[]"


LCB_REPLAY_COPIES = 3
"""Copies of a replayed call's JSON a running `lcb` test holds: in its program's text,
in the sandbox command (escaped), and while it is written."""


def request_bytes(request: ExecuteRequest) -> int:
    """What a program holds in memory while it waits and runs, roughly: its text data,
    a call test's arguments and expected value included (as their JSON), and under `lcb`
    the calls each of its first tests replays (`lcb_prior_calls`: quadratic in them)."""
    size = len(request.code)
    replayed = 0
    for index, test in enumerate(request.tests):
        if isinstance(test, StdinTest):
            size += len(test.stdin) + len(test.expected_stdout)
        elif isinstance(test, ProgramTest):
            size += len(test.check)
        else:
            text = call_test_json_bytes(test)
            size += text * CALL_VALUE_OVERHEAD
            if request.compare is Compare.LCB and index < LCB_REPLAYED_TESTS:
                size += replayed * LCB_REPLAY_COPIES
                replayed += text
        size += 256
    return size
