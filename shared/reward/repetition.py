"""Does a response repeat a block of 32+ characters 8+ times in a row? In linear time.

METHOD.md's format rule is the research code's regex `(.{32,}?)\\1{7,}` (DOTALL): some
block of at least 32 characters followed by at least 7 more copies of itself. The regex
tries every start and every block length with backtracking: quadratic, about 1.7 s for a
22,000-character response. `has_repeated_block` gives the same answer on every input.

Why it is the same decision. The regex matches iff there are i and L >= 32 with
text[i : i + 8L] of period L, i.e. text[j] == text[j + L] for the 7L positions j in
[i, i + 7L). Put an anchor every 32 characters (x = 0, 32, 64, ...). If a match (i, L)
exists, the first anchor x >= i lies in its first copy (x < i + 32 <= i + L), and the
32 characters at x appear again at x + L (both inside the match, since 7L >= 64). So
L is the distance from an anchor to a later occurrence of the anchor's 32 characters:
scanning every position y once and looking its 32 characters up among the anchors'
gives every such (x, L) pair, and each is checked exactly: the streak of
text[j] == text[j + L] through x must reach 7L, with at most 31 characters of it before
x (else an earlier anchor is in the first copy and finds it). Conversely a streak of 7L
equal pairs is a match by definition.

Cost: a hash of every 32-character window, computed for all positions at once in numpy
(5 vector passes), one vectorised lookup of all window hashes among the anchors' (a bit
table, then a binary search for the few that pass it), then checks only where a window
equals an anchor's window: linear in the length. A check measures the streak with slice
comparisons in C (a binary search that stops at the first difference), and a failed
check records where its streak ends, so later anchors inside the same streak at the same
distance are not checked again. bench/reward.py measures it against the regex.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

__all__ = ["MIN_BLOCK", "MIN_COPIES", "has_repeated_block", "regex_has_repeated_block"]

MIN_BLOCK = 32
MIN_COPIES = 8
_MULTIPLIER = 0x9E3779B97F4A7C15
"""Odd 64-bit multiplier of the window hashes (fixed, so runs are reproducible)."""


def _common_prefix(text: str, a: int, b: int, limit: int) -> int:
    """Length of the common prefix of text[a:] and text[b:], up to `limit` (C compares)."""
    low, high = 0, min(limit, len(text) - b)
    if text[a : a + high] == text[b : b + high]:
        return high
    while low < high:  # text[a:a+low] == text[b:b+low] holds, text[..high] does not
        middle = (low + high + 1) // 2
        if text[a : a + middle] == text[b : b + middle]:
            low = middle
        else:
            high = middle - 1
    return low


def _streak_through(text: str, x: int, period: int, need: int, before: int) -> int:
    """-1 if text[j] == text[j + period] for `need` positions j in a row that include x,
    starting at most `before` positions before x; else where the streak from x ends."""
    after = _common_prefix(text, x, x + period, need)
    missing = need - after
    if missing <= 0:
        return -1
    if missing <= min(before, x) and (
        text[x - missing : x] == text[x - missing + period : x + period]
    ):
        return -1
    return x + after


def _gram_hashes(text: str, width: int) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """A polynomial hash (mod 2**64) of every `width`-character window, in numpy.

    H(y) = sum of code[y + k] * M**(width - 1 - k). For a power-of-two width it is built
    by doubling, H2w(y) = Hw(y) * M**w + Hw(y + w): 5 vector passes for 32. Equal windows
    get equal hashes; a collision of unequal ones costs only a check that fails (checks
    compare the text itself), never a wrong answer.
    """
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    if width & (width - 1) == 0:
        hashes, span = codes, 1
        while span < width:
            hashes = hashes[:-span] * np.uint64(pow(_MULTIPLIER, span, 2**64)) + hashes[span:]
            span *= 2
        return hashes
    count = len(codes) - width + 1
    hashes = np.zeros(count, dtype=np.uint64)
    for offset in range(width):
        hashes = hashes * np.uint64(_MULTIPLIER) + codes[offset : offset + count]
    return hashes


def has_repeated_block(text: str, min_block: int = MIN_BLOCK, min_copies: int = MIN_COPIES) -> bool:
    """True iff some block of >= `min_block` characters occurs >= `min_copies` times in a
    row (the same decision as `regex_has_repeated_block`)."""
    n = len(text)
    if min_copies < 2 or n < min_block * min_copies:
        return False
    hashes = _gram_hashes(text, min_block)
    # An anchor can start a first copy only if 8 copies of >= 32 still fit after it.
    last_anchor = n - min_block * (min_copies - 1) - 1
    anchor_positions = np.arange(0, last_anchor + 1, min_block)
    anchors: dict[int, list[int]] = defaultdict(list)
    for x, value in zip(anchor_positions.tolist(), hashes[anchor_positions].tolist(), strict=True):
        anchors[value].append(x)
    # Every later window whose hash is an anchor's: the only places a copy can start.
    known, first, count = np.unique(hashes[anchor_positions], return_index=True, return_counts=True)
    # Windows that may equal an anchor's: a 16-bit table of the anchors' low hash bits
    # (one gather), then a binary search for those few only.
    table = np.zeros(1 << 16, dtype=bool)
    table[(known & np.uint64(0xFFFF)).astype(np.intp)] = True
    maybe = np.flatnonzero(table[(hashes[min_block:] & np.uint64(0xFFFF)).astype(np.intp)])
    later = hashes[maybe + min_block]
    slots = np.minimum(np.searchsorted(known, later), len(known) - 1)
    # A window equal to a single anchor's that is closer than one block (the anchor
    # itself, mostly) can give no period: drop those without a Python loop.
    useful = (known[slots] == later) & (
        (count[slots] > 1) | (anchor_positions[first][slots] <= maybe)
    )
    probes = maybe[useful] + min_block
    streak_end: dict[int, int] = {}  # period -> end of the last streak found too short
    for y, value in zip(probes.tolist(), hashes[probes].tolist(), strict=True):
        for x in reversed(anchors[value]):  # nearest anchor first: periods grow as x falls
            period = y - x
            if period < min_block:
                continue
            if x + period * min_copies - (min_block - 1) > n:
                break  # 8 copies no longer fit, nor will they for earlier anchors
            if x < streak_end.get(period, -1):
                continue  # inside a streak already measured at this period
            end = _streak_through(text, x, period, period * (min_copies - 1), min_block - 1)
            if end < 0:
                return True
            streak_end[period] = end
    return False


def regex_has_repeated_block(
    text: str, min_block: int = MIN_BLOCK, min_copies: int = MIN_COPIES
) -> bool:
    """The research code's quadratic check, kept as the reference for tests and the bench."""
    import re

    pattern = re.compile(rf"(.{{{min_block},}}?)\1{{{min_copies - 1},}}", re.DOTALL)
    return pattern.search(text) is not None
