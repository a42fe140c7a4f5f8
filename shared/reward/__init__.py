"""The Cobalt reward, shared by the trainer, evaluation and the verl export.

`rules.score_response` computes every component from a response, its pass rate over all
tests and the context's prev_best; `repetition` is the linear-time repeated-block check;
`tokens` counts with the policy's tokenizer.
"""

from cobalt.shared.reward.repetition import has_repeated_block
from cobalt.shared.reward.rules import (
    RewardBreakdown,
    TokenCounter,
    correctness_tier,
    improvement_adjusted,
    score_response,
)
from cobalt.shared.reward.tokens import RewardSettings, TokenizerCounter

__all__ = [
    "RewardBreakdown",
    "RewardSettings",
    "TokenCounter",
    "TokenizerCounter",
    "correctness_tier",
    "has_repeated_block",
    "improvement_adjusted",
    "score_response",
]
