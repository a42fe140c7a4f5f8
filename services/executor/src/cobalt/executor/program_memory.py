"""What a program holds in the server while it waits and runs, for admission, and the
calls an `lcb` test replays.
"""

from __future__ import annotations

import json
import threading
import weakref

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

__all__ = [
    "LCB_REPLAYED_TESTS",
    "LCB_REPLAY_BYTES",
    "LcbReplay",
    "lcb_replay",
    "request_bytes",
]


LCB_REPLAYED_TESTS = 256
"""Under `lcb`, a call test among the first this many of its request repeats the calls
before it (LiveCodeBench's one instance per problem); later ones start fresh."""

LCB_REPLAY_BYTES = 4 << 20
"""The most JSON of earlier calls one `lcb` test replays; a test whose earlier calls hold
more starts fresh, as a test past `LCB_REPLAYED_TESTS` does. Without it, replaying is
quadratic in a request's argument bytes: ten tests of 1.9 MB arguments made the server
build (and hold, on every slot at once) tens of MB per test."""


class LcbReplay:
    """The calls each `lcb` call test of one request replays, as JSON pieces made once.

    Each earlier call's `[args, kwargs]` is serialized (and escaped as a JSON string's
    content) at most once per request, when a test first needs it; a test's replay is then
    those pieces, joined straight into its sandbox command (`SandboxJob.prior_calls`).
    Thread-safe: a request's tests are prepared on several slot threads at once.
    """

    def __init__(self, request: ExecuteRequest) -> None:
        self._tests = request.tests[:LCB_REPLAYED_TESTS]
        self._index: dict[int, int] = {}
        for index, test in enumerate(self._tests):
            self._index.setdefault(id(test), index)
        self._pieces: dict[int, bytes] = {}
        self._lock = threading.Lock()
        self.serialized = 0
        """Calls serialized so far (at most one per call test: the work is linear)."""

    def calls_before(self, test: TestCase) -> tuple[bytes, ...]:
        """The escaped JSON `[args, kwargs]` of the call tests before `test` with its
        `fn_name`, in order; none when `test` is not among the replayed tests or those
        calls hold more than `LCB_REPLAY_BYTES` (it starts fresh)."""
        index = self._index.get(id(test))
        if index is None or not isinstance(test, CallTest):
            return ()
        pieces: list[bytes] = []
        total = 0
        for earlier_index in range(index):
            earlier = self._tests[earlier_index]
            if isinstance(earlier, CallTest) and earlier.fn_name == test.fn_name:
                piece = self._piece(earlier_index, earlier)
                total += len(piece) + 1
                if total > LCB_REPLAY_BYTES:
                    return ()
                pieces.append(piece)
        return tuple(pieces)

    def _piece(self, index: int, test: CallTest) -> bytes:
        with self._lock:
            piece = self._pieces.get(index)
            if piece is None:
                text = dumps_value([test.args, test.kwargs])
                # Escaped once here, as the content of the command's "prior" string.
                piece = json.dumps(text)[1:-1].encode()
                self._pieces[index] = piece
                self.serialized += 1
            return piece


_REPLAYS: dict[int, LcbReplay] = {}
_REPLAYS_LOCK = threading.Lock()


def lcb_replay(request: ExecuteRequest) -> LcbReplay:
    """The `LcbReplay` of `request`: one per request object (its tests, prepared on
    different threads, share its pieces), dropped when the request is."""
    with _REPLAYS_LOCK:
        replay = _REPLAYS.get(id(request))
        if replay is None:
            replay = _REPLAYS[id(request)] = LcbReplay(request)
            weakref.finalize(request, _REPLAYS.pop, id(request), None)
        return replay


def request_bytes(request: ExecuteRequest) -> int:
    """What a program holds in memory while it waits and runs, roughly: its text data,
    a call test's arguments and expected value included (as their JSON), and under `lcb`
    the replayed calls' JSON (`LcbReplay`: once per request, and again in each test's
    command, at most `LCB_REPLAY_BYTES` there: linear in the request's tests)."""
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
                # Its own piece, made once; the earlier ones again in its command, unless
                # they are too many to replay (it starts fresh).
                size += text + (replayed if replayed <= LCB_REPLAY_BYTES else 0)
                replayed += text
        size += 256
    return size
