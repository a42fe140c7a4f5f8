"""The Cobalt reward of one response, every component kept (docs/method.md, "Reward (training)").

Inputs: the response text, how many of the problem's tests its program passed, the
context's prev_best b, and the token lengths of its parts (from a `TokenCounter`, or
given by a caller that has the policy's own token ids). Output: a `RewardBreakdown`.

Decisions where docs/method.md is silent, and why:
- "No code block at all" means `cobalt.shared.extraction.extract_program` finds no
  program: no closed, non-blank, untagged or Python-tagged block in the answer part.
  Rollouts, feedback and evaluation read a response that way, so the reward never
  disagrees with them about whether there was a program. Nothing else is computed then:
  those components are None.
- The think part is the text before the last `</think>` (an opening `<think>` included,
  the closing tag not); the answer part is the text after it (`answer_part`); "the text
  after the code" is the answer part after the closing fence line of the program's
  block. T, A and E are each tokenized on their own, also when a format rule failed
  (they are stored for analysis).
- The python-fence rule holds when the answer part has exactly one fenced block, that
  block is tagged python (or python3/py/py3), it is closed, and the answer contains no
  other run of three backticks (so an inline "```" in a sentence also breaks it).
  "Backticks inside the code" means a backtick in the judged program. The repetition
  rule reads the whole response. All four are reported separately.
- A reflection keyword counts once when it occurs 1 to 4 times in the think part as a
  whole word (not inside a longer word: "waiting" and "errors" do not count),
  case-insensitive; the bonus is 0.005 per such keyword, at most 0.025.
- The tier compares p = passed / total exactly: p = 1 only when every test passed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cobalt.shared.extraction import (
    PYTHON_LANGUAGE_TAGS,
    THINK_CLOSE,
    FencedBlock,
    answer_part,
    fenced_blocks,
)
from cobalt.shared.reward.repetition import has_repeated_block
from cobalt.shared.reward.tokens import (
    PartStarts,
    SampledTokenCounter,
    TokenCounter,
    TokenLengths,
)
from cobalt.shared.reward_format import RewardFormat

__all__ = [
    "FORMAT_PENALTY",
    "MAX_AFTER_CODE_TOKENS",
    "MAX_ANSWER_TOKENS",
    "MAX_THINK_TOKENS",
    "NO_CODE_REWARD",
    "REFLECTION_KEYWORDS",
    "FormatCheck",
    "FormatViolation",
    "ImprovementRule",
    "RewardBreakdown",
    "RewardFormat",
    "ScoreInput",
    "apply_improvement",
    "check_format",
    "correctness_tier",
    "count_reflection_keywords",
    "length_shaping",
    "score_response",
    "score_responses",
]

NO_CODE_REWARD = -1.0
FORMAT_PENALTY = -0.9
MAX_THINK_TOKENS = 4096
"""Tokens of thinking above which the length shaping penalises (T > 4096)."""
MAX_ANSWER_TOKENS = 2048
"""Tokens of answer part above which the length shaping penalises (A > 2048)."""
MAX_AFTER_CODE_TOKENS = 512
"""Tokens after the code above which the length shaping penalises (E > 512)."""

REFLECTION_KEYWORDS = (
    "wait",
    "mistake",
    "however",
    "but",
    "retry",
    "error",
    "verify",
    "wrong",
    "evaluate",
)
_MAX_KEYWORD_USES = 4
"""A reflection keyword used more often than this earns nothing (docs/method.md: 1-4 times)."""
_FENCE = "```"
_PYTHON_FENCE_TAGS = PYTHON_LANGUAGE_TAGS - {""}


class FormatViolation(StrEnum):
    """Which format rule a response broke (each costs the same -0.9, once)."""

    THINK_DELIMITER = "think_delimiter"
    """Not exactly one `</think>`."""
    PYTHON_FENCE = "python_fence"
    """Not exactly one python-tagged block, opened and closed once, after `</think>`."""
    BACKTICKS_IN_CODE = "backticks_in_code"
    """A backtick inside the program."""
    REPETITION = "repetition"
    """A block of 32+ characters repeated 8+ times in a row."""


class ImprovementRule(StrEnum):
    """What the improvement rule did to the correctness tier."""

    NOT_APPLIED = "not_applied"
    """p = 1 or b = 0: the tier stands."""
    ADDED = "added"
    """p > b: r += 0.1 (p - b) / (1 - b)."""
    REPLACED = "replaced"
    """p <= b: r = -0.1 + 0.1 (p - b) / b, whatever the tier was."""


@dataclass(frozen=True, slots=True)
class FormatCheck:
    """A response read for the format rules, with the parts the length terms measure."""

    program: str | None
    """`extract_program`'s result: the judged program; None is "no code block at all"."""
    think: str
    answer: str
    after_code: str
    think_close_count: int
    python_fence_ok: bool
    backticks_in_code: bool
    repeated_block: bool
    parts: PartStarts
    """Where think, answer and after_code sit in the response (for counting from ids)."""

    @property
    def violations(self) -> tuple[FormatViolation, ...]:
        """The broken rules, in docs/method.md's order."""
        broken = [
            (self.think_close_count != 1, FormatViolation.THINK_DELIMITER),
            (not self.python_fence_ok, FormatViolation.PYTHON_FENCE),
            (self.backticks_in_code, FormatViolation.BACKTICKS_IN_CODE),
            (self.repeated_block, FormatViolation.REPETITION),
        ]
        return tuple(violation for is_broken, violation in broken if is_broken)


@dataclass(frozen=True, slots=True)
class RewardBreakdown:
    """Every component of one response's reward, so shaping can be studied afterwards.

    With no program ("no code block at all") only the total (-1.0), the test counts and
    the validation reward (always 0) are set; the components that were not computed are
    None.
    """

    total: float
    """The training reward: `total_before_clip` clipped to [-1, 1]."""
    total_before_clip: float
    validation_reward: float
    """1.0 if every test passed, else 0.0 (the validation reward)."""
    pass_rate: float
    """p = tests_passed / tests_total."""
    prev_best: float
    """b, the context's best earlier pass rate."""
    tests_passed: int
    tests_total: int
    no_code: bool
    correctness: float | None = None
    """The tier of p: 1.0, 0.2, 0.0 or -0.1."""
    improvement: float | None = None
    """The change the improvement rule made: r after it minus the tier (0 if not applied)."""
    improvement_rule: ImprovementRule | None = None
    before_format: float | None = None
    """r after the tier and the improvement rule: correctness + improvement."""
    format: float | None = None
    """The format term added to r: -0.9 on any violation, else the length shaping."""
    format_violations: tuple[FormatViolation, ...] = ()
    think_close_count: int | None = None
    python_fence_ok: bool | None = None
    backticks_in_code: bool | None = None
    repeated_block: bool | None = None
    think_tokens: int | None = None
    answer_tokens: int | None = None
    after_code_tokens: int | None = None
    reflection_keywords: int | None = None
    """Reflection keywords occurring 1-4 times in the thinking (each counts once)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON values (enums as strings), one key per field, for columns or JSON."""
        values: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            value = getattr(self, name)
            if isinstance(value, tuple):
                value = [str(item) for item in value]
            elif isinstance(value, StrEnum):
                value = str(value)
            values[name] = value
        return values


@dataclass(frozen=True, slots=True)
class ScoreInput:
    """One response to score in a batch, with its test counts and its context's prev_best."""

    response: str
    tests_passed: int
    tests_total: int
    prev_best: float
    lengths: TokenLengths | None = None
    """T, A and E when already counted; None: count them."""
    token_ids: Sequence[int] | None = None
    """The ids the policy sampled for `response`; with a `SampledTokenCounter` the parts
    are counted from them instead of tokenizing the text again (tokens.py)."""


def correctness_tier(pass_rate: float) -> float:
    """1.0 if every test passes, 0.2 from half of them, 0.0 below half, -0.1 for none."""
    if pass_rate >= 1.0:
        return 1.0
    if pass_rate >= 0.5:
        return 0.2
    if pass_rate > 0.0:
        return 0.0
    return -0.1


def apply_improvement(
    r: float, pass_rate: float, prev_best: float
) -> tuple[float, ImprovementRule]:
    """r after the improvement rule, and which branch of it applied.

    Only when p < 1 and b > 0: a gain over b adds up to 0.1 (scaled by the headroom
    1 - b); no gain replaces r with a value in [-0.2, -0.1] (-0.1 at p = b).
    """
    if pass_rate >= 1.0 or prev_best <= 0.0:
        return r, ImprovementRule.NOT_APPLIED
    if pass_rate > prev_best:
        return r + 0.1 * (pass_rate - prev_best) / (1.0 - prev_best), ImprovementRule.ADDED
    return -0.1 + 0.1 * (pass_rate - prev_best) / prev_best, ImprovementRule.REPLACED


def _is_word_character(character: str) -> bool:
    return character.isalnum() or character == "_"


def _whole_word_count(text: str, word: str, stop_at: int) -> int:
    """Occurrences of `word` in `text` not inside a longer word (regex `\\bword\\b`), counted
    up to `stop_at` (past it the exact number does not matter).

    `str.find` scans in C and only the hits are looked at in Python; a case-insensitive
    regex alternation over a 20,000-character thinking part costs about 1 ms.
    """
    count, start = 0, text.find(word)
    while start >= 0 and count < stop_at:
        end = start + len(word)
        if (start == 0 or not _is_word_character(text[start - 1])) and (
            end == len(text) or not _is_word_character(text[end])
        ):
            count += 1
        start = text.find(word, end)
    return count


def count_reflection_keywords(think: str) -> int:
    """How many reflection keywords occur 1 to 4 times in `think` (whole words, any case)."""
    lowered = think.lower()
    return sum(
        1
        for word in REFLECTION_KEYWORDS
        if 1 <= _whole_word_count(lowered, word, stop_at=_MAX_KEYWORD_USES + 1) <= _MAX_KEYWORD_USES
    )


def _program_block(blocks: Sequence[FencedBlock]) -> FencedBlock | None:
    """The block `extract_program` takes: the last closed, non-blank Python block.

    Mirrors `cobalt.shared.extraction` (a test holds the two to the same answer) so that a
    response's blocks are found once: this runs on every response of every step.
    """
    for block in reversed(blocks):
        if block.is_closed and block.language in PYTHON_LANGUAGE_TAGS and block.body.strip():
            return block
    return None


def _blocks(response: str) -> tuple[str, list[FencedBlock], FencedBlock | None]:
    """The answer part, its fenced blocks and the program's block (found once)."""
    answer = answer_part(response)
    blocks = fenced_blocks(answer)
    return answer, blocks, _program_block(blocks)


def _format_check(
    response: str, answer: str, blocks: list[FencedBlock], program: FencedBlock | None
) -> FormatCheck:
    close = response.rfind(THINK_CLOSE)
    answer_start = len(response) - len(answer)
    return FormatCheck(
        program=program.body if program is not None else None,
        think=response[:close] if close >= 0 else "",
        answer=answer,
        after_code=answer[program.end :] if program is not None else "",
        think_close_count=response.count(THINK_CLOSE),
        python_fence_ok=(
            len(blocks) == 1
            and blocks[0].is_closed
            and blocks[0].language in _PYTHON_FENCE_TAGS
            and answer.count(_FENCE) == 2
        ),
        backticks_in_code=program is not None and "`" in program.body,
        repeated_block=has_repeated_block(response),
        parts=PartStarts(
            think_end=max(close, 0),
            answer_start=answer_start,
            after_code_start=answer_start + program.end if program is not None else len(response),
        ),
    )


def check_format(response: str) -> FormatCheck:
    """Read `response` for the format rules and cut it into the parts the lengths measure."""
    return _format_check(response, *_blocks(response))


def length_shaping(r: float, lengths: TokenLengths, reflection_keywords: int) -> float:
    """The format term of a well-formed response (docs/method.md step 4, "Otherwise").

    r >= 0: 0, or -0.01 when any part is over its limit. r < 0: a small bonus for
    thinking (tanh(T/1024) * 0.075) and for reflecting (0.005 per keyword, at most 0.025)
    while T <= 4096, else -0.1; then -0.1 each for A > 2048 and E > 512.
    """
    over_answer = lengths.answer > MAX_ANSWER_TOKENS
    over_after_code = lengths.after_code > MAX_AFTER_CODE_TOKENS
    if r >= 0:
        over = lengths.think > MAX_THINK_TOKENS or over_answer or over_after_code
        return -0.01 if over else 0.0
    if lengths.think <= MAX_THINK_TOKENS:
        term = math.tanh(lengths.think / 1024) * 0.075 + min(0.025, 0.005 * reflection_keywords)
    else:
        term = -0.1
    return term - (0.1 if over_answer else 0.0) - (0.1 if over_after_code else 0.0)


def _check_if_program(response: str) -> FormatCheck | None:
    """The format check, or None for "no code block at all" (then nothing is computed)."""
    answer, blocks, program = _blocks(response)
    if program is None:
        return None
    return _format_check(response, answer, blocks, program)


_NOT_COUNTED = TokenLengths(0, 0, 0)
"""Stands in for the lengths of a response without a program, which are never read."""


def _check_counts(tests_passed: int, tests_total: int, prev_best: float) -> float:
    if tests_total < 1 or not 0 <= tests_passed <= tests_total:
        raise ValueError(
            f"need 0 <= tests_passed <= tests_total and tests_total >= 1, "
            f"not {tests_passed}/{tests_total}"
        )
    if not 0.0 <= prev_best <= 1.0:
        raise ValueError(f"prev_best must be in [0, 1], not {prev_best}")
    return tests_passed / tests_total


def _breakdown(
    check: FormatCheck | None,
    lengths: TokenLengths,
    *,
    tests_passed: int,
    tests_total: int,
    prev_best: float,
    reward_format: RewardFormat,
) -> RewardBreakdown:
    pass_rate = _check_counts(tests_passed, tests_total, prev_best)
    counts: dict[str, Any] = {
        "pass_rate": pass_rate,
        "prev_best": prev_best,
        "tests_passed": tests_passed,
        "tests_total": tests_total,
        "validation_reward": 1.0 if tests_passed == tests_total else 0.0,
    }
    if check is None:  # no program passes a test, whatever count the caller had
        counts["validation_reward"] = 0.0
        return RewardBreakdown(
            total=NO_CODE_REWARD, total_before_clip=NO_CODE_REWARD, no_code=True, **counts
        )
    tier = correctness_tier(pass_rate)
    r, rule = apply_improvement(tier, pass_rate, prev_best)
    violations = check.violations
    if reward_format is RewardFormat.INSTRUCT:  # no thinking block is expected or measured
        violations = tuple(v for v in violations if v is not FormatViolation.THINK_DELIMITER)
        lengths, keywords = dataclasses.replace(lengths, think=0), 0
    else:
        keywords = count_reflection_keywords(check.think)
    format_term = FORMAT_PENALTY if violations else length_shaping(r, lengths, keywords)
    unclipped = r + format_term
    return RewardBreakdown(
        total=max(-1.0, min(1.0, unclipped)),
        total_before_clip=unclipped,
        no_code=False,
        correctness=tier,
        improvement=r - tier,
        improvement_rule=rule,
        before_format=r,
        format=format_term,
        format_violations=violations,
        think_close_count=check.think_close_count,
        python_fence_ok=check.python_fence_ok,
        backticks_in_code=check.backticks_in_code,
        repeated_block=check.repeated_block,
        think_tokens=lengths.think,
        answer_tokens=lengths.answer,
        after_code_tokens=lengths.after_code,
        reflection_keywords=keywords,
        **counts,
    )


def score_response(
    response: str,
    *,
    tests_passed: int,
    tests_total: int,
    prev_best: float,
    tokens: TokenCounter | None = None,
    lengths: TokenLengths | None = None,
    token_ids: Sequence[int] | None = None,
    reward_format: RewardFormat = RewardFormat.REASONING,
) -> RewardBreakdown:
    """The Cobalt reward of `response`, whose program passed `tests_passed` of the tests.

    Args:
        response: The model's whole response.
        tests_passed: Tests the program passed (0 when there is no program).
        tests_total: All of the problem's tests (p = tests_passed / tests_total).
        prev_best: b, the context's best earlier pass rate.
        tokens: The token counter (the policy's tokenizer) for T, A and E.
        lengths: T, A and E already counted; then `tokens` is not needed.
        token_ids: The ids the policy sampled; a `SampledTokenCounter` counts from them.
        reward_format: The paper's rules for reasoning models, or the instruct mode for
            models without a thinking block (`RewardFormat`).

    Returns:
        Every component; `total` is the training reward.

    Raises:
        ValueError: the counts or prev_best are out of range, or neither `tokens` nor
            `lengths` is given.
    """
    return score_responses(
        [ScoreInput(response, tests_passed, tests_total, prev_best, lengths, token_ids)],
        tokens=tokens,
        reward_format=reward_format,
    )[0]


def score_responses(
    items: Sequence[ScoreInput],
    *,
    tokens: TokenCounter | None = None,
    reward_format: RewardFormat = RewardFormat.REASONING,
) -> list[RewardBreakdown]:
    """The rewards of many responses (a training step), with one batched token count.

    The same as `score_response` on each item. Part lengths come from the item
    (`lengths`), else from its sampled `token_ids` when `tokens` can count those, else the
    parts of every remaining response go to the tokenizer in one `count_many` call, which
    a Rust tokenizer spreads over the cores.

    Raises:
        ValueError: as `score_response`, for the first item that is out of range, or an
            item needs counting and there is no `tokens`.
    """
    for item in items:
        _check_counts(item.tests_passed, item.tests_total, item.prev_best)
    checks = [_check_if_program(item.response) for item in items]
    lengths: list[TokenLengths | None] = [
        _known_lengths(item, check, tokens) for item, check in zip(items, checks, strict=True)
    ]
    to_count = [
        check
        for check, known in zip(checks, lengths, strict=True)
        if check is not None and known is None
    ]
    if to_count and tokens is None:
        raise ValueError("give a token counter (tokens=) or every item's lengths")
    texts = [part for check in to_count for part in (check.think, check.answer, check.after_code)]
    counted = iter(tokens.count_many(texts) if tokens is not None and texts else [])
    scored: list[RewardBreakdown] = []
    for item, check, known in zip(items, checks, lengths, strict=True):
        if check is not None and known is None:
            known = TokenLengths(next(counted), next(counted), next(counted))
        scored.append(
            _breakdown(
                check,
                known or _NOT_COUNTED,
                tests_passed=item.tests_passed,
                tests_total=item.tests_total,
                prev_best=item.prev_best,
                reward_format=reward_format,
            )
        )
    return scored


def _known_lengths(
    item: ScoreInput, check: FormatCheck | None, tokens: TokenCounter | None
) -> TokenLengths | None:
    """The part lengths without tokenizing: given, or counted from the sampled ids."""
    if check is None or item.lengths is not None:
        return item.lengths
    if item.token_ids is not None and isinstance(tokens, SampledTokenCounter):
        return tokens.count_parts_from_ids(item.response, item.token_ids, check.parts)
    return None
