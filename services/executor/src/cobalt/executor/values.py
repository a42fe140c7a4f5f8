"""JSON values as the executor reads and writes them: request data and returned values.

Two things make plain `json.loads`/`json.dumps` unsafe on data a hostile program or
caller chose. CPython refuses to convert integers of more than 4,300 digits to or from
text (a guard against the quadratic cost of that conversion), so a correct answer of
5,000 digits would fail to parse; and decoding or comparing a value nested thousands
deep overflows the stack. Here integers too long for that limit stay text (`LargeInt`,
compared digit by digit, linear), and decoding stops with `ValueError` on nesting the
stack cannot hold.
"""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = [
    "MAX_PLAIN_INT_DIGITS",
    "LargeInt",
    "dumps_value",
    "loads_returned",
    "loads_value",
    "parse_int",
]

MAX_PLAIN_INT_DIGITS = 4000
"""Integer literals longer than this (sign included) stay text as `LargeInt`; CPython's
default int<->str limit is 4,300 digits."""


class LargeInt:
    """An integer too long for CPython's int<->str limit, kept as its decimal text.

    JSON integers have one spelling (no leading zeros, no plus sign), so two are equal
    exactly when their texts are.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LargeInt) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"LargeInt({len(self.text)} digits)"


def parse_int(text: str) -> int | LargeInt:
    return int(text) if len(text) <= MAX_PLAIN_INT_DIGITS else LargeInt(text)


def loads_value(text: str | bytes) -> Any:
    """Decode JSON text; long integers become `LargeInt`.

    Raises:
        ValueError: not JSON, or nested too deeply to decode.
    """
    try:
        return json.loads(text, parse_int=parse_int)
    except RecursionError as exc:
        raise ValueError("the value is nested too deeply") from exc


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("an object with a repeated key")
    return value


def loads_returned(text: str | bytes) -> Any:
    """Decode a value a program returned: as `loads_value`, and an object whose keys
    repeat (a dict keyed by a str subclass with its own hashing, or a forged record) is
    refused instead of collapsing onto whichever value came last.

    Raises:
        ValueError: not JSON, a repeated key, or nested too deeply to decode.
    """
    try:
        return json.loads(text, parse_int=parse_int, object_pairs_hook=_unique_keys)
    except RecursionError as exc:
        raise ValueError("the value is nested too deeply") from exc


class _HasLargeInt(Exception):
    """A value holds a `LargeInt`: the fast encoder cannot write it."""


def _refuse(value: object) -> Any:
    if isinstance(value, LargeInt):
        raise _HasLargeInt
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def dumps_value(value: Any) -> str:
    """Encode a decoded value as JSON text (the fast encoder unless it holds a `LargeInt`).

    Raises:
        TypeError: the value holds something that is not JSON.
        ValueError: an integer too long for CPython's int->str limit, nested too deeply.
    """
    try:
        return json.dumps(value, default=_refuse)
    except _HasLargeInt:
        parts: list[str] = []
        _encode(value, parts)
        return "".join(parts)
    except RecursionError as exc:
        raise ValueError("the value is nested too deeply") from exc


def _encode(value: Any, out: list[str]) -> None:
    # The slow path, for values that hold a LargeInt only. Nesting is bounded by the
    # request schema (MAX_VALUE_DEPTH), so recursion is safe here.
    if isinstance(value, LargeInt):
        out.append(value.text)
    elif isinstance(value, float):
        if math.isnan(value):
            out.append("NaN")
        elif math.isinf(value):
            out.append("Infinity" if value > 0 else "-Infinity")
        else:
            out.append(repr(value))
    elif isinstance(value, list | tuple):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(", ")
            _encode(item, out)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(", ")
            out.append(json.dumps(str(key)) + ": ")
            _encode(item, out)
        out.append("}")
    else:
        out.append(json.dumps(value))
