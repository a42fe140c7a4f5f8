"""The messages of turn k: turn 0's messages, then each earlier turn's answer and feedback.

The feedback a `TurnRecord` carries is the finished user message (the template already
applied by `feedback_for_first_failure`), exactly as the turn row stores it. So rebuilding
a conversation needs no template, and a resumed run sends the model the very messages it
was sent before, even if a template's wording were to change in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cobalt.shared.extraction import DEFAULT_HISTORY_CAP_CHARS, history_text

__all__ = ["TurnRecord", "next_turn_messages"]


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What a finished turn leaves for the next ones."""

    raw_response: str
    """The model's whole answer, thinking included (the history keeps a part of it)."""
    feedback: str
    """The user message that answered it."""


def next_turn_messages(
    initial_messages: Sequence[dict[str, str]],
    previous_turns: Sequence[TurnRecord],
    *,
    think_cap_chars: int = DEFAULT_HISTORY_CAP_CHARS,
) -> list[dict[str, str]]:
    """The conversation sent at turn `len(previous_turns)`.

    Args:
        initial_messages: Turn 0's messages (`PromptTemplate.initial_messages`).
        previous_turns: Turns 0..k-1 in order.
        think_cap_chars: Characters of each earlier answer the history keeps.

    Returns:
        New message dicts (the inputs are not modified): the initial messages, then per
        earlier turn an assistant message with `history_text` of its answer (thinking
        removed, capped, the end kept) and a user message with its feedback.
    """
    messages = [dict(message) for message in initial_messages]
    for turn in previous_turns:
        messages.append(
            {"role": "assistant", "content": history_text(turn.raw_response, think_cap_chars)}
        )
        messages.append({"role": "user", "content": turn.feedback})
    return messages
