"""The messages of turn k: turn 0's messages, then each earlier turn's answer and feedback.

A `TurnRecord` carries what a turn row stores: the answer as the history keeps it
(`stored_response`: thinking removed, capped) and the finished feedback message (the
template already applied by `feedback_for_first_failure`). The loop builds every prompt
from exactly these, so the store needs the full message list of turn 0 only: any later
turn's prompt is rebuilt from its trajectory's rows, byte for byte (`messages_of_turns`),
instead of repeating the whole conversation in every row (quadratic in the turns). A
resumed run likewise sends the model the very messages it was sent before, even if a
template's wording were to change in between.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TurnRecord", "messages_of_turns", "next_turn_messages"]


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What a finished turn leaves for the next ones."""

    stored_response: str
    """The answer as the history keeps it (`cobalt.shared.extraction.history_text`)."""
    feedback: str
    """The user message that answered it."""


def next_turn_messages(
    initial_messages: Sequence[dict[str, str]], previous_turns: Sequence[TurnRecord]
) -> list[dict[str, str]]:
    """The conversation sent at turn `len(previous_turns)`.

    Args:
        initial_messages: Turn 0's messages (`PromptTemplate.initial_messages`).
        previous_turns: Turns 0..k-1 in order.

    Returns:
        New message dicts (the inputs are not modified): the initial messages, then per
        earlier turn an assistant message with its stored response and a user message
        with its feedback.
    """
    messages = [dict(message) for message in initial_messages]
    for turn in previous_turns:
        messages.append({"role": "assistant", "content": turn.stored_response})
        messages.append({"role": "user", "content": turn.feedback})
    return messages


def messages_of_turns(turns: Sequence[Any]) -> list[list[dict[str, Any]]]:
    """The messages each turn of one trajectory was sent, from its stored rows.

    Args:
        turns: The trajectory's turn rows in turn order (anything with `messages`,
            `stored_response` and `feedback`); turn 0 holds the initial messages.

    Returns:
        One message list per turn. A row that stored its full message list (rows written
        before only turn 0 kept one) is returned as stored.
    """
    if not turns:
        return []
    initial = turns[0].messages
    records = [TurnRecord(t.stored_response, t.feedback) for t in turns]
    return [
        list(turn.messages)
        if index == 0 or turn.messages
        else next_turn_messages(initial, records[:index])
        for index, turn in enumerate(turns)
    ]
