"""The Cobalt reward (docs/method.md, "Reward (training)"), shared by the trainer and scoring.

`rules` computes every component of one response's reward (`score_response`, or
`score_responses` for a whole step); `repetition` is the O(n log n) repeated-block check
that decides exactly as the research code's quadratic regex; `tokens` counts with the
policy's tokenizer; `verpo` is the VeRPO baseline's reward (difficulty-weighted partial
test passes, weights from the group). docs/reward.md has the rules and the decisions
behind them.
"""

from cobalt.shared.reward.repetition import (
    MIN_BLOCK_CHARS,
    MIN_COPIES,
    has_repeated_block,
    regex_has_repeated_block,
)
from cobalt.shared.reward.rules import (
    FORMAT_PENALTY,
    MAX_AFTER_CODE_TOKENS,
    MAX_ANSWER_TOKENS,
    MAX_THINK_TOKENS,
    NO_CODE_REWARD,
    REFLECTION_KEYWORDS,
    FormatCheck,
    FormatViolation,
    ImprovementRule,
    RewardBreakdown,
    RewardFormat,
    ScoreInput,
    apply_improvement,
    check_format,
    correctness_tier,
    count_reflection_keywords,
    length_shaping,
    score_response,
    score_responses,
)
from cobalt.shared.reward.tokens import (
    TOKENIZER_FILE,
    PartStarts,
    RewardSettings,
    SampledTokenCounter,
    TokenCounter,
    TokenizerCounter,
    TokenLengths,
)
from cobalt.shared.reward.verpo import (
    DEFAULT_OUTCOME_WEIGHT,
    VerpoScore,
    difficulty_weights,
    group_pass_rates,
    pass_vector,
    verpo_scores,
)

__all__ = [
    "DEFAULT_OUTCOME_WEIGHT",
    "FORMAT_PENALTY",
    "FormatCheck",
    "FormatViolation",
    "ImprovementRule",
    "MAX_AFTER_CODE_TOKENS",
    "MAX_ANSWER_TOKENS",
    "MAX_THINK_TOKENS",
    "MIN_BLOCK_CHARS",
    "MIN_COPIES",
    "NO_CODE_REWARD",
    "PartStarts",
    "REFLECTION_KEYWORDS",
    "RewardBreakdown",
    "RewardFormat",
    "RewardSettings",
    "SampledTokenCounter",
    "ScoreInput",
    "TOKENIZER_FILE",
    "TokenCounter",
    "TokenLengths",
    "TokenizerCounter",
    "VerpoScore",
    "apply_improvement",
    "check_format",
    "correctness_tier",
    "count_reflection_keywords",
    "difficulty_weights",
    "group_pass_rates",
    "has_repeated_block",
    "length_shaping",
    "pass_vector",
    "regex_has_repeated_block",
    "score_response",
    "score_responses",
    "verpo_scores",
]
