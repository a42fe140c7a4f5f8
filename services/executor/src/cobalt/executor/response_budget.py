"""How much test text one response may carry, counted in bytes as sent, and handed out
while the tests finish.

A response's size is what its JSON takes on the wire, not its length in characters: a
control byte in a program's output is six bytes once escaped (`\\u0001`), a CJK
character three. And it is capped as each test finishes, not once every test is done:
a small request with two thousand tests, each printing its maximum, would otherwise hold
gigabytes in the server before the cap applied.

Each test is guaranteed an equal share of the budget; a test may take more while the
budget still holds every unfinished test's share (one big output among quiet tests keeps
its text).
"""

from __future__ import annotations

import json
import threading

from cobalt.shared.contracts import TestResult
from cobalt.shared.text import truncate_middle

__all__ = ["CAPPED_FIELDS", "ResponseBudget", "json_bytes", "truncate_to_json_bytes"]

CAPPED_FIELDS = ("stdout", "stderr", "feedback")
"""The fields of a test result whose size the program decides."""

_MAX_JSON_BYTES_PER_CHAR = 6
"""The most one character can take in JSON text (a control character: `\\u001f`)."""


def json_bytes(text: str) -> int:
    """The bytes `text` takes as a JSON string in a response (quotes not counted)."""
    encoded = json.dumps(text, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return len(encoded) - 2


def truncate_to_json_bytes(text: str, max_bytes: int) -> str:
    """`text`, middle-truncated (as `truncate_middle` does) to at most `max_bytes` of JSON."""
    if len(text) * _MAX_JSON_BYTES_PER_CHAR <= max_bytes:
        return text  # fits whatever it holds: no need to measure
    size = json_bytes(text)
    if size <= max_bytes:
        return text
    chars = len(text) * max_bytes // size
    while chars > 0:
        cut = truncate_middle(text, chars)
        size = json_bytes(cut)
        if size <= max_bytes:
            return cut
        # Shrink in proportion to the overshoot, by at least one character.
        chars = min(chars - 1, chars * max_bytes // size)
    return ""


def returned_bytes(result: TestResult) -> int:
    """The JSON bytes of a result's `returned` value (0 when there is none)."""
    if result.returned is None:
        return 0
    return len(json.dumps(result.returned, ensure_ascii=True, allow_nan=True).encode())


def result_bytes(result: TestResult) -> int:
    """The JSON bytes of a result's program-sized fields, its returned value included."""
    texts = sum(json_bytes(getattr(result, name)) for name in CAPPED_FIELDS)
    return texts + returned_bytes(result)


def cap_result(result: TestResult, max_bytes: int) -> TestResult:
    """`result` with its program-sized fields cut to `max_bytes` together, each to an
    equal share when they do not fit as they are."""
    texts = [getattr(result, name) for name in CAPPED_FIELDS]
    cheap_bound = sum(len(text) for text in texts) * _MAX_JSON_BYTES_PER_CHAR
    if cheap_bound + returned_bytes(result) <= max_bytes:
        return result
    if result_bytes(result) <= max_bytes:
        return result
    if result.returned is not None:
        # Over the cap, the returned value goes first: the feedback still shows it.
        result = result.model_copy(update={"returned": None})
        if result_bytes(result) <= max_bytes:
            return result
    share = max_bytes // len(CAPPED_FIELDS)
    update = {
        name: truncate_to_json_bytes(text, share)
        for name, text in zip(CAPPED_FIELDS, texts, strict=True)
    }
    return result.model_copy(update=update)


class ResponseBudget:
    """The bytes of program-sized text one response (or one program of a batch) may
    carry, handed out to its tests as each finishes. Thread-safe: tests finish on the
    sandbox threads."""

    def __init__(self, max_bytes: int, tests: int) -> None:
        self.fair_share = max_bytes // max(tests, 1)
        self.left = max_bytes
        self.unfinished = tests
        self._lock = threading.Lock()

    def take(self, result: TestResult) -> TestResult:
        """`result`, capped to what is left after every other unfinished test's share."""
        with self._lock:
            self.unfinished -= 1
            allowance = max(self.left - self.fair_share * self.unfinished, self.fair_share)
            allowance = min(allowance, self.left)
            self.left -= allowance  # reserved while it is measured, outside the lock
        capped = cap_result(result, allowance)
        used = result_bytes(capped)
        with self._lock:
            self.left += allowance - used
        return capped
