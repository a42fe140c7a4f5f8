"""The O(n log n) repeated-block check decides exactly as the research code's regex."""

from __future__ import annotations

import random
import time

import pytest

from cobalt.shared.reward import has_repeated_block, regex_has_repeated_block

ALPHABETS = ["ab", "abc", "a", "xyz01 \n", "αβ€", "ab\n", "0123456789abcdef"]


def periodic_text(rng: random.Random) -> str:
    """Padding, then `copies` copies of a random block (maybe broken), then padding."""
    alphabet = rng.choice(ALPHABETS)

    def pad() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))

    if rng.random() < 0.1:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 700)))
    period = rng.choice([rng.randint(1, 20), rng.randint(28, 40), rng.randint(30, 80), 16, 32])
    block = "".join(rng.choice(alphabet) for _ in range(period))
    body = block * rng.choice([6, 7, 7, 8, 8, 9, rng.randint(1, 14)]) + block[: rng.randint(0, 31)]
    for _ in range(rng.choice([0, 0, 1, 2])):  # copies broken by one character
        if body:
            k = rng.randrange(len(body))
            body = body[:k] + rng.choice(alphabet + "Z") + body[k + 1 :]
    return pad() + body + pad()


def nested_text(rng: random.Random) -> str:
    """A short period (1-31) repeated around the edge of 8 copies of its smallest
    multiple >= 32: "ab" needs 256 characters, period 10 needs 8 * 40 = 320."""
    period = rng.randint(1, 31)
    block = "".join(rng.choice("abc") for _ in range(period))
    smallest_multiple = period * -(-32 // period)
    length = 8 * smallest_multiple + rng.randint(-3, 1)
    run = (block * (length // period + 1))[:length]
    return rng.choice(["", "Q", "QR"]) + run + rng.choice(["", "Z"])


def test_same_decision_as_the_regex_on_thousands_of_adversarial_texts() -> None:
    rng = random.Random(2026)
    decisions = []
    for _ in range(2500):
        text = periodic_text(rng) if rng.random() < 0.8 else nested_text(rng)
        ours = has_repeated_block(text)
        assert ours == regex_has_repeated_block(text), repr(text)
        decisions.append(ours)
    assert 0.2 < sum(decisions) / len(decisions) < 0.8  # both answers are well exercised


@pytest.mark.parametrize(("min_block", "min_copies"), [(1, 3), (4, 3), (5, 4), (3, 6)])
def test_same_decision_for_other_block_sizes_and_copy_counts(
    min_block: int, min_copies: int
) -> None:
    rng = random.Random(min_block * 100 + min_copies)
    for _ in range(800):
        text = periodic_text(rng)[:150]
        expected = regex_has_repeated_block(text, min_block, min_copies)
        assert has_repeated_block(text, min_block, min_copies) == expected, repr(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", False),
        ("x" * 256, True),  # period 1: a 32-character block of x, 8 times
        ("x" * 255, False),
        ("ab" * 128, True),  # period 2 runs as blocks of 32
        ("ab" * 127 + "a", False),  # 255 characters
        ("0123456789" * 31 + "012345678", False),  # period 10: blocks of 40 need 320
        ("0123456789" * 32, True),
        ("0123456789abcdef" * 16, True),  # period 16 is also period 32
        ("0123456789abcdef" * 15 + "0123456789abcde", False),
        ("q" * 31 + ("A" * 33 + "!") * 8, True),  # period 34 after a prefix
        (("A" * 33 + "!") * 7 + "A" * 33, False),  # 7 copies and a near miss
        ("é" * 256, True),  # non-ASCII characters are characters, not bytes
        ("\ud800" * 256, True),  # even a lone surrogate
        (("line of code that repeats\n" + "x = 1\n") * 8, True),  # 32 characters, 8 times
        (("line of code that repeats\n" + "x = 1\n") * 7 + "line", False),
    ],
)
def test_edge_cases(text: str, expected: bool) -> None:
    assert regex_has_repeated_block(text) is expected
    assert has_repeated_block(text) is expected


def test_a_repetition_anywhere_in_a_long_response_is_found() -> None:
    rng = random.Random(5)
    prose = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz \n") for _ in range(30_000))
    loop = "Let me reconsider the case n = 0 again. " * 8
    assert has_repeated_block(prose) is False
    for cut in (0, 12_345, 30_000):
        assert has_repeated_block(prose[:cut] + loop + prose[cut:]) is True
    assert has_repeated_block(prose[:15_000] + loop[:-1] + prose[15_000:]) is False


def test_time_stays_near_linear_on_many_near_misses() -> None:
    """200,000 characters of 7-copy loops of many periods (where the regex backtracks
    the most and every sample passes the hash test) are checked well within a second."""
    rng = random.Random(9)
    parts = []
    while sum(map(len, parts)) < 200_000:
        block = "".join(rng.choice("ab") for _ in range(rng.randint(32, 300)))
        parts.append(block * 7 + "#")
    text = "".join(parts)
    started = time.process_time()
    assert has_repeated_block(text) is False
    assert time.process_time() - started < 2.0


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="min_copies >= 3"):
        has_repeated_block("abc", 32, 2)
