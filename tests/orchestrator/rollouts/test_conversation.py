"""The messages of turns 0, 1 and 2."""

from __future__ import annotations

from cobalt.orchestrator.rollouts.conversation import TurnRecord, next_turn_messages
from cobalt.shared.extraction import history_text

INITIAL = [{"role": "system", "content": "be careful"}, {"role": "user", "content": "task"}]
TURNS = [
    TurnRecord(raw_response="<think>hmm</think>answer 0", feedback="fails test 1"),
    TurnRecord(raw_response="<think>again</think>answer 1 " + "y" * 100, feedback="all passed"),
]


def test_turn_0_is_the_initial_messages_copied() -> None:
    messages = next_turn_messages(INITIAL, [])
    assert messages == INITIAL
    messages[1]["content"] = "changed"
    assert INITIAL[1]["content"] == "task"


def test_turn_1_adds_the_stripped_answer_and_its_feedback() -> None:
    messages = next_turn_messages(INITIAL, TURNS[:1])
    assert messages[2:] == [
        {"role": "assistant", "content": "answer 0"},
        {"role": "user", "content": "fails test 1"},
    ]


def test_turn_2_keeps_every_earlier_turn_in_order_and_caps_answers() -> None:
    messages = next_turn_messages(INITIAL, TURNS, think_cap_chars=20)
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert messages[2]["content"] == "answer 0" and messages[3]["content"] == "fails test 1"
    assert messages[4]["content"] == "y" * 20  # the end of the answer is kept
    assert messages[5]["content"] == "all passed"
    default = next_turn_messages(INITIAL, TURNS)
    assert default[4]["content"] == history_text(TURNS[1].raw_response)
    assert "again" not in default[4]["content"]
    assert INITIAL[-1] == {"role": "user", "content": "task"}  # inputs are not modified
