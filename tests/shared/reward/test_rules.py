"""The reward's worked values (METHOD.md), the format rules and the length shaping."""

from __future__ import annotations

import math

import pytest

from cobalt.shared.reward import correctness_tier, improvement_adjusted, score_response


class Words:
    """A stand-in tokenizer: one token per whitespace-separated word."""

    def count(self, text: str) -> int:
        return len(text.split())


def distinct_words(count: int, stem: str = "w") -> str:
    """`count` different words: long without tripping the repetition rule."""
    return " ".join(f"{stem}{i}" for i in range(count)) + " "


GOOD = "<think>I read the task.</think>Here it is.\n```python\nprint(1)\n```\nDone."


def reward(response: str = GOOD, p: float = 0.0, b: float = 0.0) -> float:
    return score_response(response, pass_rate=p, prev_best=b, tokens=Words()).total


@pytest.mark.parametrize(
    ("p", "b", "expected"),
    [
        (1.0, 0.0, 1.0),
        (1.0, 0.7, 1.0),
        (0.6, 0.0, 0.2),
        (0.6, 0.5, 0.22),
        (0.9, 0.2, 0.2875),
        (0.5, 0.5, -0.1),
        (0.3, 0.5, -0.14),
        (0.0, 0.5, -0.2),
        (0.2, 0.0, 0.0),
        (0.0, 0.0, -0.1),
    ],
)
def test_worked_values_before_the_format_term(p: float, b: float, expected: float) -> None:
    assert improvement_adjusted(correctness_tier(p), p, b) == pytest.approx(expected)


def test_a_well_formed_short_answer_gets_no_format_term_when_r_is_not_negative() -> None:
    scored = score_response(GOOD, pass_rate=0.9, prev_best=0.2, tokens=Words())
    assert scored.format == 0.0 and scored.format_violations == []
    assert scored.total == pytest.approx(0.2875)
    assert (scored.correctness, scored.improvement) == (0.2, pytest.approx(0.0875))
    assert scored.validation == 0.0 and not scored.no_code


def test_no_code_block_is_minus_one_and_nothing_else() -> None:
    scored = score_response(
        "<think>x</think>no code here", pass_rate=0.0, prev_best=0.5, tokens=Words()
    )
    assert (scored.total, scored.no_code, scored.format) == (-1.0, True, 0.0)


@pytest.mark.parametrize(
    ("response", "violation"),
    [
        ("no think tag\n```python\nprint(1)\n```", "tags, not exactly 1"),
        ("<think>a</think><think>b</think>\n```python\nprint(1)\n```", "tags, not exactly 1"),
        ("<think>a</think>\n```\nprint(1)\n```", "not exactly one python block"),
        ("<think>a</think>\n```python\nx=1\n```\n```python\nx=2\n```", "not exactly one python"),
        ("<think>a</think>\n```python\nprint(1)\n```\n```text\n1\n```", "not exactly one python"),
        ("<think>a</think>\n```python\ns = `x`\n```", "backticks inside the code"),
        (
            "<think>"
            + "spam and eggs forever and ever, again! " * 9
            + "</think>\n```python\np()\n```",
            "repeated 8+ times",
        ),
    ],
)
def test_format_violations_cost_0_9(response: str, violation: str) -> None:
    scored = score_response(response, pass_rate=1.0, prev_best=0.0, tokens=Words())
    assert scored.format == -0.9 and scored.total == pytest.approx(0.1)
    assert any(violation in v for v in scored.format_violations), scored.format_violations


def test_long_parts_cost_0_01_when_r_is_not_negative() -> None:
    long_think = "<think>" + distinct_words(4097) + "</think>\n```python\nprint(1)\n```"
    assert reward(long_think, p=1.0) == pytest.approx(0.99)
    long_tail = "<think>a</think>\n```python\nprint(1)\n```\n" + distinct_words(513, "t")
    assert reward(long_tail, p=1.0) == pytest.approx(0.99)
    assert reward(GOOD, p=1.0) == 1.0


def test_negative_r_is_shaped_by_thinking_length_and_reflection() -> None:
    think = distinct_words(1023, "h") + "wait but wait error, error; error: error. error"
    response = f"<think>{think}</think>\n```python\nprint(1)\n```"
    scored = score_response(response, pass_rate=0.0, prev_best=0.0, tokens=Words())
    # wait (2 times) and but (once) count; error (5 times) does not.
    assert scored.reflection_keywords == 2
    expected = -0.1 + math.tanh(scored.think_tokens / 1024) * 0.075 + 0.01
    assert scored.format == pytest.approx(expected + 0.1) and scored.total == pytest.approx(
        expected
    )


def test_negative_r_with_too_much_thinking_or_answer_is_pushed_down() -> None:
    over_think = (
        "<think>"
        + distinct_words(4100)
        + "</think>\n```python\np()\n```\n"
        + distinct_words(600, "t")
    )
    scored = score_response(over_think, pass_rate=0.0, prev_best=0.0, tokens=Words())
    # -0.1 (T > 4096), -0.1 (E > 512), and A > 2048 is false
    assert scored.format == pytest.approx(-0.2)
    assert scored.total == pytest.approx(-0.3)


def test_total_is_clipped_and_inputs_are_checked() -> None:
    bad = "x\n```python\ns = `1`\n```\n" + "abcdefghij" * 40
    scored = score_response(bad, pass_rate=0.0, prev_best=0.5, tokens=Words())
    assert scored.unclipped == pytest.approx(-0.2 - 0.9) and scored.total == -1.0
    with pytest.raises(ValueError, match="must be in"):
        score_response(GOOD, pass_rate=1.5, prev_best=0.0, tokens=Words())


def test_validation_reward_is_all_or_nothing() -> None:
    assert score_response(GOOD, pass_rate=1.0, prev_best=0, tokens=Words()).validation == 1.0
    assert score_response(GOOD, pass_rate=0.99, prev_best=0, tokens=Words()).validation == 0.0
