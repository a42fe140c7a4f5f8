"""The messages of turns 0, 1 and 2, and rebuilding them from stored rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cobalt.orchestrator.rollouts.conversation import (
    TurnRecord,
    messages_of_turns,
    next_turn_messages,
)

INITIAL = [{"role": "system", "content": "be careful"}, {"role": "user", "content": "task"}]
TURNS = [
    TurnRecord(stored_response="answer 0", feedback="fails test 1"),
    TurnRecord(stored_response="answer 1", feedback="all passed"),
]


@dataclass
class Row:
    messages: list[dict[str, Any]]
    stored_response: str
    feedback: str


def test_turn_0_is_the_initial_messages_copied() -> None:
    messages = next_turn_messages(INITIAL, [])
    assert messages == INITIAL
    messages[1]["content"] = "changed"
    assert INITIAL[1]["content"] == "task"


def test_turn_1_adds_the_stored_answer_and_its_feedback() -> None:
    messages = next_turn_messages(INITIAL, TURNS[:1])
    assert messages[2:] == [
        {"role": "assistant", "content": "answer 0"},
        {"role": "user", "content": "fails test 1"},
    ]


def test_turn_2_keeps_every_earlier_turn_in_order() -> None:
    messages = next_turn_messages(INITIAL, TURNS)
    assert [m["content"] for m in messages] == [
        "be careful",
        "task",
        "answer 0",
        "fails test 1",
        "answer 1",
        "all passed",
    ]
    assert INITIAL[-1] == {"role": "user", "content": "task"}  # inputs are not modified


def test_stored_rows_give_back_the_messages_every_turn_was_sent() -> None:
    rows = [
        Row(INITIAL, "answer 0", "fails test 1"),
        Row([], "answer 1", "fails test 2"),
        Row([], "answer 2", ""),
    ]
    sent = [next_turn_messages(INITIAL, TURNS[:0])]
    sent.append(next_turn_messages(INITIAL, [TurnRecord("answer 0", "fails test 1")]))
    sent.append(
        next_turn_messages(
            INITIAL,
            [TurnRecord("answer 0", "fails test 1"), TurnRecord("answer 1", "fails test 2")],
        )
    )
    assert messages_of_turns(rows) == sent
    assert messages_of_turns([]) == []


def test_rows_that_stored_their_full_prompt_are_returned_as_stored() -> None:
    old_style = [{"role": "user", "content": "as it was sent"}]
    rows = [Row(INITIAL, "a", "f"), Row(old_style, "b", "")]
    assert messages_of_turns(rows)[1] == old_style
