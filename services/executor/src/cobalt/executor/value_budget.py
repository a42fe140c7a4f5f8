"""What the server spends on a value a program returned: decoding, comparing and sending
it back are bounded by the test, never by what the program chose to write.

A returned value arrives as JSON text of up to the test's output limit. Decoding text of
nested empty lists costs about 27 bytes of server memory per byte (a list object per
`[]`), so 16 MiB of it would cost the server half a gigabyte, and a value nested a few
hundred deep cannot be written into a response at all (the serializer's depth limit).
So, before anything is decoded, the text must fit a budget charged to the test:

- at most `memory_mb / DECODE_AMPLIFICATION` of it (the server spends on decoding no
  more memory than the test's own limit), and
- at most `SIZE_RATIO` times the expected value's JSON (or `READ_FLOOR`, whichever is
  more): a value that equals the expected one is written by the harness in about its
  size (a float within tolerance, `-1.2345678901234567e-07` for `0`, is the widest case,
  under 10 times), so a longer text cannot be a correct answer.

Past the budget the test is a wrong answer that says why. A returned value nested deeper
than `MAX_SHOWN_DEPTH` is judged as usual but left out of the response (`returned` is
None; the feedback shows it as text).
"""

from __future__ import annotations

from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from cobalt.executor.values import dumps_value
from cobalt.shared.contracts import CallTest, TestResult
from cobalt.shared.contracts.executor import MAX_VALUE_DEPTH

__all__ = [
    "CALL_VALUE_OVERHEAD",
    "DECODE_AMPLIFICATION",
    "MAX_SHOWN_DEPTH",
    "READ_FLOOR",
    "SIZE_RATIO",
    "call_test_json_bytes",
    "nested_within",
    "over_read_budget",
    "sendable",
]

DECODE_AMPLIFICATION = 32
"""Server bytes per byte of JSON text decoded, at worst (nested empty lists: ~27)."""
READ_FLOOR = 64 << 10
"""Returned text always read up to this size, whatever the expected value's."""
SIZE_RATIO = 32
"""How many times the expected value's JSON size a returned value may take."""
MAX_SHOWN_DEPTH = 2 * MAX_VALUE_DEPTH
"""Deepest returned value copied into a response (the typed form nests tuples twice);
well below the response serializer's limit of 255 levels, whatever wraps it."""


def over_read_budget(text: str, expected: Any, memory_mb: int) -> str | None:
    """Why a returned value's JSON `text` is too large to read for its test, or None."""
    size = len(text)
    if size <= READ_FLOOR:
        return None
    by_memory = (memory_mb << 20) // DECODE_AMPLIFICATION
    if size > by_memory:
        return (
            f"the returned value takes {size} bytes of JSON, more than the judge reads "
            f"for a test with a {memory_mb} MiB memory limit ({by_memory} bytes)"
        )
    try:
        by_expected = max(READ_FLOOR, SIZE_RATIO * len(dumps_value(expected)))
    except (TypeError, ValueError):
        return None  # the request's schema already bounds the expected value
    if size > by_expected:
        return (
            f"the returned value takes {size} bytes of JSON, over {SIZE_RATIO} times the "
            "expected value's: it cannot equal it"
        )
    return None


def nested_within(value: Any, max_depth: int) -> bool:
    """Whether `value`'s lists and objects nest at most `max_depth` deep (iterative)."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, list | tuple | dict):
            if depth > max_depth:
                return False
            children = item.values() if isinstance(item, dict) else item
            pending.extend((child, depth + 1) for child in children)
    return True


def sendable(result: TestResult) -> TestResult:
    """`result`, with its `returned` value dropped if a response could not carry it.

    The last guard of the response: whatever a judge path copied into `returned`, a
    response (a batch's too, with its neighbours' results) is always serializable.
    """
    if result.returned is None:
        return result
    try:
        to_json(result.returned)
    except (PydanticSerializationError, ValueError, RecursionError):
        return result.model_copy(update={"returned": None})
    return result


CALL_VALUE_OVERHEAD = 8
"""Server bytes a decoded call-test value holds per byte of its JSON, about (a list of
small ints: an 8-byte pointer per 2-3 characters, plus the objects)."""


def call_test_json_bytes(test: CallTest) -> int:
    """The JSON size of a call test's arguments and expected value; admission counts
    `CALL_VALUE_OVERHEAD` times it (decoded values take several times their text, and
    the sandbox command holds their JSON again)."""
    try:
        return len(dumps_value([test.args, test.kwargs, test.expected]))
    except (TypeError, ValueError):
        return 0
