"""Which responses the reward's format term is written for: reasoning or instruct models.

It lives outside `cobalt.shared.reward` (which re-exports it) because commands offer it as
an option (`--reward-format`), and importing that package loads numpy and tokenizers:
`cobalt reward --help` and `cobalt train --help` should not.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["RewardFormat"]


class RewardFormat(StrEnum):
    """Which responses the format term is written for (chosen per training job and in
    `cobalt reward score`; docs/reward.md)."""

    REASONING = "reasoning"
    """The paper's rules, for reasoning models: exactly one `</think>`, and the thinking's
    length and reflection words shape a negative reward."""
    INSTRUCT = "instruct"
    """For models that write no thinking block (instruct models such as SmolLM2-Instruct,
    Qwen2.5-Coder-Instruct): the `</think>` rule is not checked and the thinking counts as
    empty (T = 0, no reflection words); every other rule is unchanged. Under the paper's
    rules such a model loses 0.9 on every response, so a correct program scores +0.1 and the
    signal is mostly the format."""
