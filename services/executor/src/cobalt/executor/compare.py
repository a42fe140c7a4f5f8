"""Output comparators: whether what a program produced equals what was expected.

Comparison always runs here, in the trusted server, on plain data (bytes decoded to text,
or JSON values decoded by the server), never on objects the program created.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal, localcontext
from typing import Any

from cobalt.executor.values import LargeInt
from cobalt.shared.contracts import Compare

__all__ = [
    "FLOAT_TOLERANCE",
    "outputs_match",
    "values_match",
]

FLOAT_TOLERANCE = 1e-6
"""Absolute or relative tolerance of the `float` comparator."""

Number = int | float | LargeInt


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

    Both sides are plain JSON data (dict, list, str, int, float, bool, None, and
    `LargeInt` for integers too long for CPython's int<->str limit), so Python's equality
    is safe here. Booleans only equal booleans (True is not 1). With `Compare.FLOAT`,
    numbers nested anywhere compare within the tolerance; strings compare with the output
    comparator of `mode`, so "lines" also applies inside returned strings. The walk uses
    an explicit stack, so no nesting depth can overflow the interpreter's.
    """
    pending = [(actual, expected)]
    while pending:
        got, want = pending.pop()
        if isinstance(want, bool) or isinstance(got, bool):
            if not (isinstance(want, bool) and isinstance(got, bool) and got == want):
                return False
        elif _is_number(want) and _is_number(got):
            if not _numbers_equal(got, want, mode):
                return False
        elif isinstance(want, list) and isinstance(got, list):
            if len(got) != len(want):
                return False
            pending.extend(zip(got, want, strict=True))
        elif isinstance(want, dict) and isinstance(got, dict):
            if got.keys() != want.keys():
                return False
            pending.extend((got[key], want[key]) for key in want)
        elif isinstance(want, str) and isinstance(got, str):
            same = got == want if mode is Compare.COBALT else outputs_match(got, want, mode)
            if not same:
                return False
        elif not (type(got) is type(want) and got == want):
            return False
    return True


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | LargeInt)


def _as_decimal(value: Number) -> Decimal:
    return Decimal(value.text) if isinstance(value, LargeInt) else Decimal(value)


def _numbers_equal(got: Number, want: Number, mode: Compare) -> bool:
    if isinstance(got, LargeInt) or isinstance(want, LargeInt):
        if mode is not Compare.FLOAT:
            return got == want
    elif mode is not Compare.FLOAT:
        return got == want
    else:
        try:
            return _numbers_close(float(got), float(want))
        except OverflowError:
            pass  # an integer beyond float's range: compare exactly below
    a, b = _as_decimal(got), _as_decimal(want)
    if a.is_nan() or b.is_nan():
        return a.is_nan() and b.is_nan()
    if a.is_infinite() or b.is_infinite():
        return a == b
    with localcontext() as context:
        context.prec = 50
        difference = abs(a - b)
        tolerance = Decimal(FLOAT_TOLERANCE)
        return difference <= tolerance or difference <= tolerance * max(abs(a), abs(b))
