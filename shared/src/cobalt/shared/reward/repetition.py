"""Does a response repeat a block of 32+ characters 8+ times in a row? In O(n log n).

docs/method.md's format rule is the research code's regex `(.{32,}?)\\1{7,}` (DOTALL): a block
of at least 32 characters followed by at least 7 more copies of itself. The regex tries
every start and every block length with backtracking, which is quadratic (about 1.7 s
for a 22,000-character response). `has_repeated_block` gives the same decision on every
input; `regex_has_repeated_block` is the regex itself, kept as the reference.

Why it is the same decision. Write s for the text, n for its length, K = 8 copies and
W = 32 characters. Call a "streak of period L" a stretch of consecutive positions j with
s[j] == s[j + L].

1. The regex matches iff some L >= W has a streak of period L of length >= (K - 1) L.
   A match is s[i : i + K L] = B^K with |B| = L >= W, which says exactly that
   s[j] == s[j + L] for the (K - 1) L positions j in [i, i + (K - 1) L). Conversely such
   a streak starting at i makes s[i : i + K L] K copies of s[i : i + L]. Nothing else
   is needed: a block with a shorter primitive period (e.g. "ab" repeated) also has
   every multiple of it as a period, and the smallest multiple >= W is one of the L that
   this tries; the regex's lazy `{32,}?` and backtracking change which match it reports,
   never whether one exists.
2. Sampling. For a period L, take the sample points x = 0, S, 2S, ... with S = (K - 1 -
   C) L and C = floor((K - 1) / 2) (S = 4L, C = 3 for K = 8). A streak [i, i + (K - 1) L)
   contains a sample x with i <= x < i + S, and then [x, x + C L) lies inside the streak,
   so s[x : x + C L] == s[x + L : x + L + C L]. That equality is necessary, so testing
   it at every sample of every L (by hash, below) misses no match.
3. Exactness. Each sample that passes is then checked on the text itself: the maximal
   streak of period L through x is measured with slice comparisons (C speed), and the
   text matches iff it is at least (K - 1) L long. A hash collision therefore only costs
   a check that fails; it never changes the answer.

Cost. Samples: sum over L = 32 .. n/8 of n / 4L, about (n / 4) ln(n / 256): ~22,000 for
20,000 characters, all tested at once in numpy with a polynomial hash mod 2**64 of the
prefixes (one cumulative sum). The samples' positions depend only on the length, so one
table ordered by the length each sample needs serves every text up to its capacity (a
text uses a prefix of it) and is kept between calls. Checks: a sample passes only
inside a stretch with period L of length >= 4L (exponent >= 4); streaks already measured
are not measured again, and a text whose periodic stretches stay below 8 copies has
O(n log n) of them in total.
Only a crafted input whose blocks collide under the 64-bit hash (Thue-Morse-like
strings) can cost more checks; the answer is still exact.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "MAX_CACHED_TABLE_CHARS",
    "MIN_BLOCK_CHARS",
    "MIN_COPIES",
    "has_repeated_block",
    "regex_has_repeated_block",
]

MIN_BLOCK_CHARS = 32
"""Characters of the shortest block the format rule looks for (docs/method.md)."""

MIN_COPIES = 8
"""Copies in a row of that block that break the format rule (docs/method.md)."""

_BASE = 0x9E3779B97F4A7C15
"""Odd 64-bit hash base, so it has an inverse mod 2**64 (fixed: runs are reproducible)."""

MAX_CACHED_TABLE_CHARS = 1 << 18
"""Longest text whose sample table is kept between calls (larger ones build their own).

A 262,144-character table holds about 450,000 pairs (25 MB). Building a table costs
30-60 ms for 80,000-160,000 characters: paid once, not on every call, which made such
texts 15 times slower per character when the limit was 65,536."""

_Hashes = np.ndarray[Any, np.dtype[np.uint64]]
_Indices = np.ndarray[Any, np.dtype[np.int64]]


@functools.cache
def _power_table(size: int, base: int) -> _Hashes:
    """base**k mod 2**64 for k in [0, size), built by doubling (log2(size) vector steps)."""
    powers = np.ones(1, dtype=np.uint64)
    while len(powers) < size:
        step = np.uint64(pow(base, len(powers), 2**64))
        powers = np.concatenate([powers, powers * step])
    return powers[:size]


def _powers(size: int, base: int) -> _Hashes:
    """The first `size` powers, from a cached table rounded up to a power of two."""
    return _power_table(1 << max(size - 1, 1).bit_length(), base)[:size]


def _prefix_hashes(text: str) -> _Hashes:
    """Q[k] = sum of code(s[j]) * BASE**-j for j < k, mod 2**64 (Q[0] = 0).

    Then sum_t code(s[a + t]) * BASE**-t over a window equals BASE**a * (Q[a + m] - Q[a]),
    so two windows of equal length compare with one multiplication, and the whole table
    is one vector product and one cumulative sum (uint64 arithmetic wraps mod 2**64).
    """
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    inverse = pow(_BASE, -1, 2**64)
    prefix = np.zeros(len(codes) + 1, dtype=np.uint64)
    np.cumsum(codes.astype(np.uint64) * _powers(len(codes), inverse), out=prefix[1:])
    return prefix


def _common_prefix(text: str, a: int, b: int, limit: int) -> int:
    """Length of the common prefix of text[a:] and text[b:] (b > a), at most `limit`."""
    high = max(0, min(limit, len(text) - b))
    if text[a : a + high] == text[b : b + high]:
        return high
    low = 0  # invariant: the first `low` characters agree, the first `high` do not
    while high - low > 1:
        middle = (low + high) // 2
        if text[a : a + middle] == text[b : b + middle]:
            low = middle
        else:
            high = middle
    return low


def _common_suffix(text: str, a: int, b: int, limit: int) -> int:
    """Length of the common suffix of text[:a] and text[:b] (b > a), at most `limit`."""
    high = max(0, min(limit, a))
    if text[a - high : a] == text[b - high : b]:
        return high
    low = 0
    while high - low > 1:
        middle = (low + high) // 2
        if text[a - middle : a] == text[b - middle : b]:
            low = middle
        else:
            high = middle
    return low


@dataclass(frozen=True, slots=True)
class _SampleTable:
    """Every (period, sample) pair of step 2 for texts up to `capacity` characters, ordered
    by the text length each one needs, so a text of n characters uses a prefix of it."""

    needs: _Indices
    """Characters a pair needs: its comparison must fit, and so must 8 copies."""
    periods: _Indices
    samples: _Indices
    window_ends: _Indices
    """sample + C * period: the end of the first compared window."""
    shifted: _Indices
    """sample + period: the start of the second compared window."""
    shifted_ends: _Indices
    period_powers: _Hashes
    """BASE ** period, which aligns the two windows' hashes."""


def _build_table(capacity: int, min_block: int, min_copies: int) -> _SampleTable:
    copies_compared = (min_copies - 1) // 2  # C in the module docstring
    step_blocks = min_copies - 1 - copies_compared  # S / L
    periods = np.arange(min_block, capacity // min_copies + 1, dtype=np.int64)
    # Samples x of period L need x + L + C L <= n: counts per period, then all at once.
    counts = (capacity - (1 + copies_compared) * periods) // (step_blocks * periods) + 1
    period = np.repeat(periods, counts)
    first = np.repeat(np.cumsum(counts) - counts, counts)
    sample = (np.arange(len(period), dtype=np.int64) - first) * (step_blocks * period)
    needs = np.maximum(sample + (1 + copies_compared) * period, min_copies * period)
    order = np.argsort(needs, kind="stable")
    period, sample = period[order], sample[order]
    width = copies_compared * period
    return _SampleTable(
        needs=needs[order],
        periods=period,
        samples=sample,
        window_ends=sample + width,
        shifted=sample + period,
        shifted_ends=sample + period + width,
        period_powers=_powers(capacity // min_copies + 1, _BASE)[period],
    )


_cached_table = functools.lru_cache(maxsize=8)(_build_table)


def _table(length: int, min_block: int, min_copies: int) -> _SampleTable:
    """The table for a text of `length`: cached up to MAX_CACHED_TABLE_CHARS (<= 25 MB)."""
    if length > MAX_CACHED_TABLE_CHARS:
        return _build_table(length, min_block, min_copies)
    capacity = max(4096, 1 << (length - 1).bit_length())
    return _cached_table(capacity, min_block, min_copies)


def _passing_samples(text: str, min_block: int, min_copies: int) -> tuple[list[int], list[int]]:
    """(period, sample) pairs, by period then sample, where step 2's equality holds by hash."""
    table = _table(len(text), min_block, min_copies)
    used = int(np.searchsorted(table.needs, len(text), side="right"))
    prefix = _prefix_hashes(text)
    left = prefix[table.window_ends[:used]] - prefix[table.samples[:used]]
    right = prefix[table.shifted_ends[:used]] - prefix[table.shifted[:used]]
    hits = np.flatnonzero(left == right * table.period_powers[:used])
    periods, samples = table.periods[hits], table.samples[hits]
    order = np.lexsort((samples, periods))
    return periods[order].tolist(), samples[order].tolist()


def has_repeated_block(
    text: str, min_block: int = MIN_BLOCK_CHARS, min_copies: int = MIN_COPIES
) -> bool:
    """Whether some block of >= `min_block` characters occurs >= `min_copies` times in a row.

    The same decision as `regex_has_repeated_block` on every input (the module docstring
    has the argument), in O(n log n) time instead of the regex's quadratic backtracking.

    Args:
        text: Any text (a whole model response).
        min_block: Shortest block length, in characters.
        min_copies: Copies in a row that count as a repetition; at least 3.

    Returns:
        True when the text contains such a repetition.

    Raises:
        ValueError: `min_block` < 1 or `min_copies` < 3.
    """
    if min_block < 1 or min_copies < 3:
        raise ValueError(f"need min_block >= 1 and min_copies >= 3, not {min_block}, {min_copies}")
    if len(text) < min_block * min_copies:
        return False
    measured_period, measured_end = -1, -1
    for period, sample in zip(*_passing_samples(text, min_block, min_copies), strict=True):
        if period == measured_period and sample < measured_end:
            continue  # inside the maximal streak just measured at this period: too short
        need = (min_copies - 1) * period
        forward = _common_prefix(text, sample, sample + period, need)
        if forward + _common_suffix(text, sample, sample + period, need - forward) >= need:
            return True
        measured_period, measured_end = period, sample + forward
    return False


@functools.cache
def _regex(min_block: int, min_copies: int) -> re.Pattern[str]:
    return re.compile(rf"(.{{{min_block},}}?)\1{{{min_copies - 1},}}", re.DOTALL)


def regex_has_repeated_block(
    text: str, min_block: int = MIN_BLOCK_CHARS, min_copies: int = MIN_COPIES
) -> bool:
    """The research code's quadratic check, kept as the reference for tests and the bench."""
    return _regex(min_block, min_copies).search(text) is not None
