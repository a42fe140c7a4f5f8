"""Lines and tokens of a text, one at a time: the output comparators' view of a large
output, in memory that does not grow with how many lines or tokens it has.

`str.splitlines` and `str.split` build every piece at once: a 16 MiB output of
one-character lines is 8 million strings, half a gigabyte of server memory for one test.
These generators yield the same pieces lazily, and `same_sequences` compares two such
streams pair by pair, stopping at the first difference.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from itertools import zip_longest

__all__ = ["lines_of", "pieces_of", "same_sequences", "tokens_of"]

_LINE_BREAK = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
"""Where `str.splitlines` splits."""
_TOKEN = re.compile(r"\S+")
"""What `str.split()` yields (`\\s` is the same Unicode whitespace as `str.isspace`)."""


def lines_of(text: str) -> Iterator[str]:
    """`text.splitlines()`, one line at a time."""
    position, end = 0, len(text)
    while position < end:
        found = _LINE_BREAK.search(text, position)
        if found is None:
            yield text[position:]
            return
        yield text[position : found.start()]
        position = found.end()


def pieces_of(text: str, separator: str) -> Iterator[str]:
    """`text.split(separator)`, one piece at a time."""
    position = 0
    while True:
        found = text.find(separator, position)
        if found < 0:
            yield text[position:]
            return
        yield text[position:found]
        position = found + len(separator)


def tokens_of(text: str) -> Iterator[str]:
    """`text.split()`, one token at a time."""
    return (match.group() for match in _TOKEN.finditer(text))


def same_sequences(
    got: Iterator[str],
    want: Iterator[str],
    same: Callable[[str, str], bool],
    missing: str | None = None,
) -> bool:
    """Whether two streams have pairwise `same` items. Where one stream has ended, its
    items count as `missing` (None: a stream that ends first never matches)."""
    for a, b in zip_longest(got, want):
        if a is None or b is None:
            if missing is None:
                return False
            a = missing if a is None else a
            b = missing if b is None else b
        if not same(a, b):
            return False
    return True
