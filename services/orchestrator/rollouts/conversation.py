"""The messages of turn k: turn 0's messages, then each earlier turn's answer and feedback."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cobalt.orchestrator.rollouts.extraction import history_text

__all__ = ["TurnRecord", "next_turn_messages"]


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What a finished turn leaves for the next: the raw answer and the feedback on it."""

    raw_response: str
    feedback: str


def next_turn_messages(
    initial_messages: Sequence[dict[str, str]],
    previous_turns: Sequence[TurnRecord],
    *,
    think_cap_chars: int = 6000,
) -> list[dict[str, str]]:
    """The conversation sent at turn len(previous_turns).

    Each earlier answer enters the history as its answer part (thinking removed), capped
    at `think_cap_chars` (METHOD.md); the raw answer stays in the turn's row.
    """
    messages = [dict(m) for m in initial_messages]
    for turn in previous_turns:
        messages.append(
            {"role": "assistant", "content": history_text(turn.raw_response, think_cap_chars)}
        )
        messages.append({"role": "user", "content": turn.feedback})
    return messages
