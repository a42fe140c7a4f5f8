"""The reward's rules (docs/method.md): worked values, format rules, length shaping, clip."""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction

import pytest

from cobalt.shared.extraction import extract_program
from cobalt.shared.reward import (
    FormatViolation,
    ImprovementRule,
    RewardBreakdown,
    RewardFormat,
    ScoreInput,
    TokenizerCounter,
    TokenLengths,
    apply_improvement,
    check_format,
    correctness_tier,
    count_reflection_keywords,
    score_response,
    score_responses,
)

GOOD = "<think>I read the task.</think>Here it is.\n```python\nprint(1)\n```\nDone."

WORKED_VALUES = [
    (Fraction(1), Fraction(0), 1.0),
    (Fraction(1), Fraction(7, 10), 1.0),
    (Fraction(3, 5), Fraction(0), 0.2),
    (Fraction(3, 5), Fraction(1, 2), 0.22),
    (Fraction(9, 10), Fraction(1, 5), 0.2875),
    (Fraction(1, 2), Fraction(1, 2), -0.1),
    (Fraction(3, 10), Fraction(1, 2), -0.14),
    (Fraction(0), Fraction(1, 2), -0.2),
    (Fraction(1, 5), Fraction(0), 0.0),
    (Fraction(0), Fraction(0), -0.1),
]


def distinct_words(count: int, stem: str = "w") -> str:
    """`count` different words: long without tripping the repetition rule."""
    return " ".join(f"{stem}{i}" for i in range(count)) + " "


def scored(
    response: str = GOOD,
    p: Fraction = Fraction(0),
    b: float = 0.0,
    *,
    reward_format: RewardFormat = RewardFormat.REASONING,
    **lengths: int,
) -> RewardBreakdown:
    """The reward with explicit part lengths (T, A, E default to 10, 10, 1)."""
    given = TokenLengths(
        think=lengths.get("think", 10),
        answer=lengths.get("answer", 10),
        after_code=lengths.get("after_code", 1),
    )
    return score_response(
        response,
        tests_passed=p.numerator,
        tests_total=p.denominator,
        prev_best=b,
        lengths=given,
        reward_format=reward_format,
    )


@pytest.mark.parametrize(("p", "b", "expected"), WORKED_VALUES)
def test_worked_values_before_the_format_term(p: Fraction, b: Fraction, expected: float) -> None:
    r, _ = apply_improvement(correctness_tier(float(p)), float(p), float(b))
    assert r == pytest.approx(expected)
    breakdown = scored(GOOD, p, float(b))
    assert breakdown.before_format == pytest.approx(expected)
    assert breakdown.correctness + breakdown.improvement == pytest.approx(expected)


def test_the_tiers_and_which_improvement_branch_applied() -> None:
    assert [correctness_tier(p) for p in (1.0, 0.99, 0.5, 0.49, 0.01, 0.0)] == [
        1.0, 0.2, 0.2, 0.0, 0.0, -0.1,
    ]  # fmt: skip
    assert apply_improvement(1.0, 1.0, 0.5) == (1.0, ImprovementRule.NOT_APPLIED)
    assert apply_improvement(0.2, 0.6, 0.0) == (0.2, ImprovementRule.NOT_APPLIED)
    assert apply_improvement(0.2, 0.6, 0.5)[1] is ImprovementRule.ADDED
    assert apply_improvement(0.2, 0.5, 0.5) == (pytest.approx(-0.1), ImprovementRule.REPLACED)
    gain = scored(GOOD, Fraction(3, 5), 0.5)
    assert (gain.correctness, gain.improvement) == (0.2, pytest.approx(0.02))
    loss = scored(GOOD, Fraction(1, 2), 0.5)  # replaces the 0.2 tier
    assert (loss.correctness, loss.improvement) == (0.2, pytest.approx(-0.3))
    assert loss.improvement_rule is ImprovementRule.REPLACED


def test_a_well_formed_short_answer_with_r_at_least_0_has_no_format_term() -> None:
    breakdown = scored(GOOD, Fraction(9, 10), 0.2)
    assert breakdown.format == 0.0 and breakdown.format_violations == ()
    assert breakdown.total == pytest.approx(0.2875)
    assert breakdown.validation_reward == 0.0 and not breakdown.no_code
    assert (breakdown.tests_passed, breakdown.tests_total) == (9, 10)
    assert (breakdown.think_close_count, breakdown.python_fence_ok) == (1, True)
    assert breakdown.backticks_in_code is False and breakdown.repeated_block is False


@pytest.mark.parametrize(
    "response",
    [
        "<think>x</think>no code here",
        "<think>x</think>\n```python\n\n```",  # a blank block is no program
        "<think>x</think>\n```python\nprint(1)\n",  # cut off before the closing fence
        "<think>x</think>\n```bash\nls\n```",  # not Python
        "<think>```python\nprint(1)\n```</think>the code was in the thinking",
        "<think>never stopped thinking ```python\nprint(1)\n```",
    ],
)
def test_no_code_block_is_minus_one_and_nothing_else(response: str) -> None:
    breakdown = score_response(response, tests_passed=0, tests_total=4, prev_best=0.5)
    assert (breakdown.total, breakdown.total_before_clip, breakdown.no_code) == (-1.0, -1.0, True)
    assert breakdown.correctness is None and breakdown.format is None
    assert breakdown.think_tokens is None and breakdown.format_violations == ()
    assert breakdown.validation_reward == 0.0 and breakdown.pass_rate == 0.0
    claimed = score_response(response, tests_passed=4, tests_total=4, prev_best=0.0)
    assert (claimed.total, claimed.validation_reward) == (-1.0, 0.0)


@pytest.mark.parametrize(
    ("response", "violation"),
    [
        ("no think tag\n```python\nprint(1)\n```", FormatViolation.THINK_DELIMITER),
        ("<think>a</think>b</think>\n```python\nprint(1)\n```", FormatViolation.THINK_DELIMITER),
        ("<think>a</think>\n```\nprint(1)\n```", FormatViolation.PYTHON_FENCE),
        ("<think>a</think>\n```py\nx=1\n```\n```python\nx=2\n```", FormatViolation.PYTHON_FENCE),
        (
            "<think>a</think>\n```python\nprint(1)\n```\n```text\n1\n```",
            FormatViolation.PYTHON_FENCE,
        ),
        ("<think>a</think>Use ``` fences.\n```python\nprint(1)\n```", FormatViolation.PYTHON_FENCE),
        ("<think>a</think>\n```python\np()\n```\n```python\n", FormatViolation.PYTHON_FENCE),
        ("<think>a</think>\n```python\ns = `x`\n```", FormatViolation.BACKTICKS_IN_CODE),
        (
            "<think>" + "spam and eggs forever and ever, again! " * 8 + "</think>\n"
            "```python\np()\n```",
            FormatViolation.REPETITION,
        ),
        (
            "<think>a</think>\n```python\n" + "print('the same line, once more')\n" * 8 + "```",
            FormatViolation.REPETITION,
        ),
    ],
)
def test_each_format_violation_costs_0_9_and_is_named(
    response: str, violation: FormatViolation
) -> None:
    breakdown = scored(response, Fraction(1), 0.0)
    assert breakdown.format_violations == (violation,)
    assert breakdown.format == -0.9 and breakdown.total == pytest.approx(0.1)
    assert breakdown.to_dict()["format_violations"] == [str(violation)]


def test_several_violations_cost_0_9_once() -> None:
    response = "answer\n```python\ns = `1`\n```\n```python\nt = 2\n```"
    breakdown = scored(response, Fraction(1), 0.0)
    assert breakdown.format_violations == (
        FormatViolation.THINK_DELIMITER,
        FormatViolation.PYTHON_FENCE,
    )  # the judged program is the last block, which has no backtick
    assert breakdown.format == -0.9


def test_well_formed_variants_pass_every_rule() -> None:
    for response in [
        "<think>a</think>\n```python3\nprint(1)\n```",
        "<think>a</think>Steps:\n  ```python\n  print(1)\n  ```\nThat is all.",
        "<think>a</think>\n````python\nprint(1)\n````",
    ]:
        assert check_format(response).violations == (), response


def test_the_parts_that_are_measured() -> None:
    check = check_format("<think>plan it</think>Intro\n```python\nx = 1\n```\nAfter.\n")
    assert (check.think, check.answer) == (
        "<think>plan it",
        "Intro\n```python\nx = 1\n```\nAfter.\n",
    )
    assert (check.program, check.after_code) == ("x = 1\n", "After.\n")


def test_long_parts_cost_0_01_when_r_is_not_negative() -> None:
    assert scored(GOOD, Fraction(1), think=4096, answer=2048, after_code=512).format == 0.0
    for over in ({"think": 4097}, {"answer": 2049}, {"after_code": 513}):
        breakdown = scored(GOOD, Fraction(1), **over)
        assert breakdown.format == -0.01 and breakdown.total == pytest.approx(0.99), over
    assert scored(GOOD, Fraction(1, 5), think=5000).total == pytest.approx(-0.01)  # r = 0


def test_negative_r_is_shaped_by_thinking_length_and_reflection_words(
    words: TokenizerCounter,
) -> None:
    think = distinct_words(1000, "h") + "Wait, but WAIT: error error error error error. Waiting"
    response = f"<think>{think}</think>\n```python\nprint(1)\n```"
    breakdown = score_response(response, tests_passed=0, tests_total=3, prev_best=0.0, tokens=words)
    # wait (3 times, any case) and but (once) count; error (5 times) and waiting do not.
    assert breakdown.reflection_keywords == 2
    assert breakdown.think_tokens == words.count("<think>" + think)
    expected_format = math.tanh(breakdown.think_tokens / 1024) * 0.075 + 0.01
    assert breakdown.format == pytest.approx(expected_format)
    assert breakdown.total == pytest.approx(-0.1 + expected_format)


def test_the_reflection_bonus_is_capped_at_0_025() -> None:
    every_keyword = "wait mistake however but retry error verify wrong evaluate"
    assert count_reflection_keywords(every_keyword) == 9
    breakdown = scored(f"<think>{every_keyword}</think>\n```python\np()\n```", think=0)
    assert breakdown.format == pytest.approx(0.025)  # tanh(0) = 0, then the cap
    assert count_reflection_keywords("awaiting errors; butter, re-verify") == 1  # verify only


def test_negative_r_over_the_limits_is_pushed_down() -> None:
    assert scored(GOOD, think=4097).format == pytest.approx(-0.1)
    assert scored(GOOD, think=4097, answer=2049, after_code=513).format == pytest.approx(-0.3)
    assert scored(GOOD, think=4096, answer=2049).format == pytest.approx(math.tanh(4) * 0.075 - 0.1)
    assert scored(GOOD, think=0, after_code=513).format == pytest.approx(-0.1)


def test_the_total_is_clipped_to_minus_one() -> None:
    bad = "x\n```python\ns = `1`\n```\n"
    breakdown = scored(bad, Fraction(0), 0.5)
    assert breakdown.total_before_clip == pytest.approx(-0.2 - 0.9) and breakdown.total == -1.0


def test_validation_reward_is_all_or_nothing() -> None:
    assert scored(GOOD, Fraction(4, 4)).validation_reward == 1.0
    assert scored(GOOD, Fraction(99, 100)).validation_reward == 0.0


def test_lengths_come_from_the_tokenizer_when_not_given(words: TokenizerCounter) -> None:
    response = "<think>one two three</think>Here:\n```python\nx = 1\n```\nand then four words"
    breakdown = score_response(response, tests_passed=1, tests_total=1, prev_best=0, tokens=words)
    # "<think>" is 3 tokens (< think >) for the word tokenizer.
    assert (breakdown.think_tokens, breakdown.after_code_tokens) == (6, 4)
    assert breakdown.answer_tokens == words.count(response.split("</think>")[1])
    with pytest.raises(ValueError, match="token counter"):
        score_response(response, tests_passed=1, tests_total=1, prev_best=0)


def test_a_batch_scores_exactly_like_one_at_a_time(words: TokenizerCounter) -> None:
    items = [
        ScoreInput(GOOD, 3, 5, 0.5),
        ScoreInput("no program", 0, 2, 0.0),
        ScoreInput("<think>" + distinct_words(300) + "</think>\n```python\np()\n```", 0, 2, 0.5),
    ]
    one_by_one = [
        score_response(
            i.response,
            tests_passed=i.tests_passed,
            tests_total=i.tests_total,
            prev_best=i.prev_best,
            tokens=words,
        )
        for i in items
    ]
    assert score_responses(items, tokens=words) == one_by_one
    given = [ScoreInput(i.response, 1, 2, 0.0, lengths=TokenLengths(5000, 1, 1)) for i in items]
    assert [s.think_tokens for s in score_responses(given)] == [5000, None, 5000]
    with pytest.raises(ValueError, match="token counter"):
        score_responses(items)


@pytest.mark.parametrize(
    ("passed", "total", "prev_best"), [(3, 2, 0.0), (-1, 2, 0.0), (0, 0, 0.0), (1, 2, 1.5)]
)
def test_out_of_range_inputs_are_refused(passed: int, total: int, prev_best: float) -> None:
    with pytest.raises(ValueError, match="tests_total|prev_best"):
        score_response(
            GOOD, tests_passed=passed, tests_total=total, prev_best=prev_best, lengths=None
        )


def test_to_dict_is_plain_json_with_every_component() -> None:
    values = scored(GOOD, Fraction(1, 2), 0.5).to_dict()
    assert json.loads(json.dumps(values)) == values
    assert values["improvement_rule"] == "replaced" and values["format_violations"] == []
    assert set(values) >= {
        "total", "total_before_clip", "correctness", "improvement", "format", "pass_rate",
        "prev_best", "tests_passed", "tests_total", "no_code", "think_tokens", "answer_tokens",
        "after_code_tokens", "reflection_keywords", "validation_reward", "think_close_count",
        "python_fence_ok", "backticks_in_code", "repeated_block",
    }  # fmt: skip


def test_the_judged_program_is_always_extract_programs() -> None:
    """The format check finds the program block itself (once per response, for speed);
    it must agree with `extract_program`, which rollouts and evaluation judge."""
    pieces = [
        "<think>t</think>", "</think>", "<think>", "prose\n", "```python\nx = 1\n```\n",
        "```\ny = 2\n```\n", "```text\nout\n```\n", "```py\n\n```\n", "```python\nz = 3\n",
        "  ```python\n  w = 4\n  ```\n", "````\nv = 5\n````\n", "inline ``` here\n",
    ]  # fmt: skip
    rng = random.Random(11)
    for _ in range(3000):
        response = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        assert check_format(response).program == extract_program(response), repr(response)


INSTRUCT_ANSWER = "Here is the program.\n```python\nprint(input())\n```\nIt echoes the input."
"""How an instruct model answers: no thinking block at all."""


@pytest.mark.parametrize(("p", "b", "expected"), WORKED_VALUES)
def test_instruct_mode_gives_the_worked_values_to_answers_without_thinking(
    p: Fraction, b: Fraction, expected: float
) -> None:
    instruct = scored(INSTRUCT_ANSWER, p, float(b), reward_format=RewardFormat.INSTRUCT)
    assert instruct.format_violations == ()
    assert instruct.think_tokens == 0 and instruct.reflection_keywords == 0
    # r >= 0: no format term; r < 0: the thinking bonus of T = 0 is 0, so r stands.
    assert instruct.total == pytest.approx(expected)
    reasoning = scored(INSTRUCT_ANSWER, p, float(b), reward_format=RewardFormat.REASONING)
    assert reasoning.format_violations == (FormatViolation.THINK_DELIMITER,)
    assert reasoning.total == pytest.approx(max(-1.0, expected - 0.9))


def test_instruct_mode_keeps_every_other_format_rule() -> None:
    two_blocks = "```python\nprint(1)\n```\nor\n```python\nprint(2)\n```"
    untagged = "```\nprint(1)\n```"
    backticks = "```python\ns = `1`\n```"
    repeated = "```python\nprint(1)\n```\n" + "this block of text repeats itself! " * 9
    for response, violation in [
        (two_blocks, FormatViolation.PYTHON_FENCE),
        (untagged, FormatViolation.PYTHON_FENCE),
        (backticks, FormatViolation.BACKTICKS_IN_CODE),
        (repeated, FormatViolation.REPETITION),
    ]:
        breakdown = scored(response, Fraction(1), reward_format=RewardFormat.INSTRUCT)
        assert breakdown.format_violations == (violation,), response
        assert breakdown.total == pytest.approx(1.0 - 0.9)


def test_instruct_mode_ignores_thinking_but_not_the_answer_length() -> None:
    thought = "<think>wait, but however: verify it</think>\n```python\nprint(1)\n```"
    instruct = scored(thought, Fraction(0), think=5000, reward_format=RewardFormat.INSTRUCT)
    assert instruct.think_tokens == 0 and instruct.reflection_keywords == 0
    assert instruct.format == 0.0 and instruct.total == pytest.approx(-0.1)
    reasoning = scored(thought, Fraction(0), think=5000, reward_format=RewardFormat.REASONING)
    assert reasoning.format == pytest.approx(-0.1)  # T > 4096 under the paper's rules
    long_answer = scored(
        INSTRUCT_ANSWER, Fraction(0), answer=2049, reward_format=RewardFormat.INSTRUCT
    )
    assert long_answer.format == pytest.approx(-0.1)
    no_program = scored("no program here", Fraction(0), reward_format=RewardFormat.INSTRUCT)
    assert no_program.total == -1.0


def test_a_batch_in_instruct_mode_scores_like_one_at_a_time(words: TokenizerCounter) -> None:
    responses = [INSTRUCT_ANSWER, GOOD, "```python\nx = 1\n```", "nothing"]
    items = [ScoreInput(r, 1, 2, 0.25) for r in responses]
    batch = score_responses(items, tokens=words, reward_format=RewardFormat.INSTRUCT)
    singles = [
        score_response(
            r,
            tests_passed=1,
            tests_total=2,
            prev_best=0.25,
            tokens=words,
            reward_format=RewardFormat.INSTRUCT,
        )  # fmt: skip
        for r in responses
    ]
    assert batch == singles
    assert batch[0].think_tokens == 0 and batch[1].think_tokens == 0
