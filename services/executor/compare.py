"""Output comparators: whether what a program produced equals what was expected.

Comparison always runs here, in the trusted server, on plain data (bytes decoded to text,
or JSON values decoded by the server), never on objects the program created.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from cobalt.shared.contracts import Compare

__all__ = [
    "FLOAT_TOLERANCE",
    "outputs_match",
    "values_match",
]

FLOAT_TOLERANCE = 1e-6
"""Absolute or relative tolerance of the `float` comparator."""


def _match_cobalt(actual: str, expected: str) -> bool:
    return actual.strip() == expected.strip()


def _significant_lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _match_lines(actual: str, expected: str) -> bool:
    return _significant_lines(actual) == _significant_lines(expected)


def _parse_float(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value


def _numbers_close(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= FLOAT_TOLERANCE or abs(a - b) <= FLOAT_TOLERANCE * max(abs(a), abs(b))


def _tokens_match(actual: str, expected: str) -> bool:
    if actual == expected:
        return True
    a, b = _parse_float(actual), _parse_float(expected)
    return a is not None and b is not None and _numbers_close(a, b)


def _match_float(actual: str, expected: str) -> bool:
    got, want = actual.split(), expected.split()
    return len(got) == len(want) and all(map(_tokens_match, got, want))


_OUTPUT_MATCHERS: dict[Compare, Callable[[str, str], bool]] = {
    Compare.COBALT: _match_cobalt,
    Compare.LINES: _match_lines,
    Compare.FLOAT: _match_float,
}


def outputs_match(actual: str, expected: str, mode: Compare) -> bool:
    """Whether program output `actual` equals `expected` under comparator `mode`."""
    return _OUTPUT_MATCHERS[mode](actual, expected)


def values_match(actual: Any, expected: Any, mode: Compare) -> bool:
    """Whether a returned JSON value equals the expected JSON value.

    Both sides are plain JSON data (dict, list, str, int, float, bool, None), so Python's
    equality is safe here. Booleans only equal booleans (True is not 1). With
    `Compare.FLOAT`, numbers nested anywhere compare within the tolerance; strings compare
    with the output comparator of `mode`, so "lines" also applies inside returned strings.
    """
    if isinstance(expected, bool) or isinstance(actual, bool):
        return isinstance(expected, bool) and isinstance(actual, bool) and actual == expected
    if isinstance(expected, int | float) and isinstance(actual, int | float):
        if mode is Compare.FLOAT:
            return _numbers_close(float(actual), float(expected))
        return actual == expected
    if isinstance(expected, list) and isinstance(actual, list):
        return len(actual) == len(expected) and all(
            values_match(a, e, mode) for a, e in zip(actual, expected, strict=True)
        )
    if isinstance(expected, dict) and isinstance(actual, dict):
        return actual.keys() == expected.keys() and all(
            values_match(actual[key], expected[key], mode) for key in expected
        )
    if isinstance(expected, str) and isinstance(actual, str):
        return (
            actual == expected if mode is Compare.COBALT else outputs_match(actual, expected, mode)
        )
    return type(actual) is type(expected) and actual == expected
