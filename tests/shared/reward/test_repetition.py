"""The linear repeated-block check decides exactly as the research code's regex."""

from __future__ import annotations

import random

import pytest

from cobalt.shared.reward.repetition import has_repeated_block, regex_has_repeated_block


def generated(rng: random.Random) -> str:
    alphabet = rng.choice(["ab", "abc", "abcd", "xyz01 \n", "αβ"])
    if rng.random() < 0.25:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 600)))
    period = rng.randint(1, 80)
    block = "".join(rng.choice(alphabet) for _ in range(period))
    body = block * rng.randint(1, 12) + block[: rng.randint(0, period)]
    if body and rng.random() < 0.4:  # break one copy: a near miss
        k = rng.randrange(len(body))
        body = body[:k] + rng.choice(alphabet + "Z") + body[k + 1 :]
    pad = lambda: "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60)))  # noqa: E731
    return pad() + body + pad()


def test_same_decision_as_the_regex_on_thousands_of_adversarial_texts() -> None:
    rng = random.Random(2026)
    decisions = []
    for _ in range(3000):
        text = generated(rng)
        ours = has_repeated_block(text)
        assert ours == regex_has_repeated_block(text), repr(text)
        decisions.append(ours)
    assert 300 < sum(decisions) < 2700  # both answers are well exercised


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x" * 256, True),  # period 1: a 32-block of x's 8 times
        ("x" * 255, False),
        ("ab" * 128, True),
        ("ab" * 127 + "a", False),  # 255 characters
        ("0123456789" * 26, False),  # period 10 -> blocks of 40 need 320 characters
        ("0123456789" * 32, True),
        ("q" * 31 + ("A" * 33 + "!") * 8, True),  # period 34, after a prefix
        (("A" * 33 + "!") * 7 + "A" * 34, False),  # 7 copies and a near miss
        ("", False),
    ],
)
def test_edge_cases(text: str, expected: bool) -> None:
    assert regex_has_repeated_block(text) is expected
    assert has_repeated_block(text) is expected


def test_a_long_text_without_repetition_is_scanned_quickly() -> None:
    rng = random.Random(5)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz \n") for _ in range(50_000))
    assert has_repeated_block(text) is False
    assert has_repeated_block(text + ("loop forever! " * 3) * 8) is True
