"""The Cobalt reward of one response, every component kept (METHOD.md, Reward).

Inputs: the response text, the pass rate p of its program over all tests (from the
executor), the context's prev_best b, and a token counter. Output: a `RewardBreakdown`
with the correctness tier, the improvement term, the format term and what decided it,
the token lengths, the unclipped and the clipped total, and the validation reward.

Decisions where METHOD.md is silent, and why:
- "No code block at all" means `cobalt.shared.extraction.extract_program` finds no
  program (the rollouts and evaluation read responses the same way).
- The format term reads the whole response: exactly one `</think>`; in the answer part
  (after it) exactly one opening ```` ```python ```` fence and exactly one closing fence
  after it, and no other fence; no backtick inside the code between them; no block of
  32+ characters repeated 8+ times in a row anywhere (`repetition`).
- T is the think part (before `</think>`, the tag included), A the answer part after it,
  E the text after the closing fence of the code; each is counted with the token
  counter on its own.
- A reflection keyword (wait, mistake, however, but, retry, error, verify, wrong,
  evaluate) counts when it occurs 1 to 4 times in the think part as a whole word, case
  insensitive; each such keyword adds 0.005, capped at 0.025.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from cobalt.shared.extraction import THINK_CLOSE, extract_program
from cobalt.shared.reward.repetition import has_repeated_block

__all__ = [
    "REFLECTION_KEYWORDS",
    "RewardBreakdown",
    "TokenCounter",
    "correctness_tier",
    "improvement_adjusted",
    "score_response",
]

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

_OPEN_FENCE = "```python"
_FENCE = "```"

FORMAT_PENALTY = -0.9
THINK_LIMIT, ANSWER_LIMIT, AFTER_CODE_LIMIT = 4096, 2048, 512


class TokenCounter(Protocol):
    """Counts the tokens of a text (the policy's tokenizer by default)."""

    def count(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class RewardBreakdown:
    """Every component of one response's reward, so shaping can be studied with a query."""

    total: float
    """The reward used for training: clipped to [-1, 1]."""
    unclipped: float
    correctness: float
    """The tier of p: 1.0, 0.2, 0.0 or -0.1 (-1.0 without code)."""
    improvement: float
    """What the improvement rule changed: the tier plus this is r before the format term."""
    format: float
    """The format term added to r (-0.9 on a violation, else the length shaping)."""
    pass_rate: float
    prev_best: float
    validation: float
    """1 if every test passed, else 0 (the validation reward)."""
    no_code: bool
    format_violations: list[str] = field(default_factory=list)
    think_tokens: int = 0
    answer_tokens: int = 0
    after_code_tokens: int = 0
    reflection_keywords: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def correctness_tier(p: float) -> float:
    """1.0 if all tests pass, 0.2 from half, 0.0 below half, -0.1 if none."""
    if p >= 1.0:
        return 1.0
    if p >= 0.5:
        return 0.2
    if p > 0.0:
        return 0.0
    return -0.1


def improvement_adjusted(r: float, p: float, b: float) -> float:
    """r after the improvement rule (only when p < 1 and b > 0)."""
    if p >= 1.0 or b <= 0.0:
        return r
    if p > b:
        return r + 0.1 * (p - b) / (1.0 - b)
    return -0.1 + 0.1 * (p - b) / b


def _format_violations(response: str) -> tuple[list[str], str, str, str]:
    """(violations, think part, answer part, text after the code)."""
    violations: list[str] = []
    if response.count(THINK_CLOSE) != 1:
        violations.append(f"{response.count(THINK_CLOSE)} {THINK_CLOSE} tags, not exactly 1")
    if THINK_CLOSE in response:  # the answer part follows the LAST tag, as in extraction
        cut = response.rindex(THINK_CLOSE) + len(THINK_CLOSE)
        think, answer = response[:cut], response[cut:]
    else:
        think, answer = "", response
    after_code = ""
    opening = answer.count(_OPEN_FENCE)
    fences = answer.count(_FENCE)
    if opening != 1 or fences != 2 or answer.find(_OPEN_FENCE) != answer.find(_FENCE):
        violations.append(
            f"{opening} ```python fences and {fences - opening} other fences in the answer, "
            "not exactly one python block"
        )
    else:
        start = answer.index(_OPEN_FENCE) + len(_OPEN_FENCE)
        close = answer.index(_FENCE, start)
        code, after_code = answer[start:close], answer[close + len(_FENCE) :]
        if "`" in code:
            violations.append("backticks inside the code")
    if has_repeated_block(response):
        violations.append("a block of 32+ characters repeated 8+ times in a row")
    return violations, think, answer, after_code


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _whole_word_count(text: str, word: str) -> int:
    """Occurrences of `word` in `text` not inside a longer word (regex `\\bword\\b`).

    `str.find` scans in C; a case-insensitive regex alternation over a 20,000-character
    thinking part cost more than the rest of the reward together (bench/reward.py).
    """
    count, start = 0, text.find(word)
    while start >= 0:
        end = start + len(word)
        if (start == 0 or not _is_word_char(text[start - 1])) and (
            end == len(text) or not _is_word_char(text[end])
        ):
            count += 1
        start = text.find(word, start + 1)
    return count


def _reflection_keywords(think: str) -> int:
    lowered = think.lower()
    return sum(1 for word in REFLECTION_KEYWORDS if 1 <= _whole_word_count(lowered, word) <= 4)


def score_response(
    response: str,
    *,
    pass_rate: float,
    prev_best: float,
    tokens: TokenCounter,
    completion_tokens: int | None = None,
) -> RewardBreakdown:
    """The Cobalt reward of `response` whose program passed `pass_rate` of all tests.

    Args:
        response: The model's whole response.
        pass_rate: p, the fraction of all tests its program passed.
        prev_best: b, the context's best earlier pass rate.
        tokens: The token counter (the policy's tokenizer).
        completion_tokens: The response's length in tokens when the sampler already
            knows it (vLLM returns the ids): then only the answer part is tokenized and
            the thinking part is the rest, which is most of the cost saved.

    Raises:
        ValueError: pass_rate or prev_best outside [0, 1].
    """
    if not 0.0 <= pass_rate <= 1.0 or not 0.0 <= prev_best <= 1.0:
        raise ValueError(f"pass_rate {pass_rate} and prev_best {prev_best} must be in [0, 1]")
    validation = 1.0 if pass_rate >= 1.0 else 0.0
    if extract_program(response) is None:
        return RewardBreakdown(
            total=-1.0,
            unclipped=-1.0,
            correctness=-1.0,
            improvement=0.0,
            format=0.0,
            pass_rate=pass_rate,
            prev_best=prev_best,
            validation=0.0,
            no_code=True,
        )
    tier = correctness_tier(pass_rate)
    r = improvement_adjusted(tier, pass_rate, prev_best)
    violations, think, answer, after_code = _format_violations(response)
    a, e = tokens.count(answer), tokens.count(after_code)
    t = tokens.count(think) if completion_tokens is None else max(0, completion_tokens - a)
    keywords = _reflection_keywords(think)
    if violations:
        format_term = FORMAT_PENALTY
    elif r >= 0:
        over = t > THINK_LIMIT or a > ANSWER_LIMIT or e > AFTER_CODE_LIMIT
        format_term = -0.01 if over else 0.0
    else:
        if t <= THINK_LIMIT:
            format_term = math.tanh(t / 1024) * 0.075 + min(0.025, 0.005 * keywords)
        else:
            format_term = -0.1
        format_term -= 0.1 if a > ANSWER_LIMIT else 0.0
        format_term -= 0.1 if e > AFTER_CODE_LIMIT else 0.0
    unclipped = r + format_term
    return RewardBreakdown(
        total=max(-1.0, min(1.0, unclipped)),
        unclipped=unclipped,
        correctness=tier,
        improvement=r - tier,
        format=format_term,
        pass_rate=pass_rate,
        prev_best=prev_best,
        validation=validation,
        no_code=False,
        format_violations=violations,
        think_tokens=t,
        answer_tokens=a,
        after_code_tokens=e,
        reflection_keywords=keywords,
    )
