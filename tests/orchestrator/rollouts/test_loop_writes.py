"""The loop's turn writes: in the background, strictly in order, and never past a failure.

An in-memory `TurnStore` records the order of events; the model is the fake server and
the executor a real one, so only the store is a stand-in here (the database store has
its own tests in test_runs.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from cobalt.orchestrator.rollouts.loop import RolloutSpec, roll_out_problem
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams
from cobalt.orchestrator.store.repo_turns import TurnRow
from cobalt.shared.clients import AsyncExecutorClient, ModelEndpoint
from cobalt.shared.contracts import ProblemRow, StdinTest
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai

PROBLEM = ProblemRow(
    external_id="double",
    statement="Read n and print 2n.",
    public_tests=[StdinTest(stdin="2", expected_stdout="4")],
    hidden_tests=[StdinTest(stdin="3", expected_stdout="6")],
)
WRONG = "```python\nprint(int(input()) + 1)\n```"


class RecordingStore:
    """Keeps turns in memory and logs every save's start and end."""

    def __init__(self, *, slow_save_s: float = 0.0, fail_on_save: int | None = None) -> None:
        self.rows: list[TurnRow] = []
        self.events: list[str] = []
        self.slow_save_s = slow_save_s
        self.fail_on_save = fail_on_save
        self._lock = threading.Lock()
        self._saves = 0

    def stored_turns(self, problem_id: int) -> dict[int, list[TurnRow]]:
        return {}

    def save(self, rows: Sequence[TurnRow]) -> None:
        with self._lock:
            self._saves += 1
            number = self._saves
        self.events.append(f"save {rows[0].turn_index} start")
        threading.Event().wait(self.slow_save_s)
        if number == self.fail_on_save:
            raise ConnectionError("database went away")
        self.rows.extend(rows)
        self.events.append(f"save {rows[0].turn_index} end")

    def cancelled(self) -> bool:
        return False


@pytest.fixture
def model() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI(responder=lambda messages, index: WRONG)
    with serve_fake_openai(fake) as url:
        yield fake, url


def roll_out(url: str, executor_url: str, store: RecordingStore, turns: int) -> Any:
    spec = RolloutSpec(run_id=1, n=1, feedback_turns=turns, sampling=SamplingParams(max_tokens=200))

    async def go() -> Any:
        sampler = ChatSampler(ModelEndpoint(base_url=url, model="fake-model"), max_retries=0)
        executor = AsyncExecutorClient(base_url=executor_url)
        try:
            return await roll_out_problem(
                spec, 5, PROBLEM, PromptTemplate.load("default"), sampler, executor, store
            )
        finally:
            await sampler.aclose()
            await executor.close()

    return asyncio.run(go())


def test_the_next_turn_is_sampled_while_the_previous_one_is_written_in_order(
    model: tuple[FakeOpenAI, str], executor_url: str
) -> None:
    fake, url = model
    store = RecordingStore(slow_save_s=0.3)
    requests_at_save_end: list[int] = []
    original_save = store.save

    def save(rows: Sequence[TurnRow]) -> None:
        original_save(rows)
        requests_at_save_end.append(len(fake.requests))

    store.save = save  # type: ignore[method-assign]
    histories = roll_out(url, executor_url, store, turns=2)

    assert [r.turn_index for r in store.rows] == [0, 1, 2]
    assert store.events == [f"save {t} {edge}" for t in range(3) for edge in ("start", "end")]
    # Turn 1 was requested before turn 0's (slow) write finished: the loop did not wait.
    assert requests_at_save_end[0] >= 2
    assert [len(h) for h in histories.values()] == [3]


def test_a_failed_write_stops_the_loop_and_nothing_after_it_is_written(
    model: tuple[FakeOpenAI, str], executor_url: str
) -> None:
    _, url = model
    store = RecordingStore(fail_on_save=2)
    with pytest.raises(ConnectionError, match="database went away"):
        roll_out(url, executor_url, store, turns=4)
    # Turn 0 is stored; turn 1's write failed, so no later turn may be stored (no gap).
    assert [r.turn_index for r in store.rows] == [0]
    assert store.events == ["save 0 start", "save 0 end", "save 1 start"]
