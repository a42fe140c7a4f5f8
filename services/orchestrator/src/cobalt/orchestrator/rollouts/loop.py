"""Evaluation runs on the multi-turn engine: every turn of one problem written to the store.

`roll_out_problem` advances every trajectory (sample) of one problem of one run to its
last turn. It starts from whatever the store already holds, so a retried or resumed job
continues where the previous attempt stopped, and every turn is written as soon as it is
judged (`TurnStore.save`, idempotent on (run, problem, sample, turn)), in the background
and in order while the next turn is sampled: a worker killed at any moment loses at most
the turns it had not written, leaves no gap, and writes none twice.

The turns themselves (sample, judge, feed back) are `engine.run_turns`, shared with
multi-turn training; this module records them and stops a cancelled run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from cobalt.orchestrator.rollouts.engine import (
    JudgedTurn,
    MultiTurnSpec,
    PastTurn,
    TurnBatch,
    TurnObserver,
    run_turns,
)
from cobalt.orchestrator.rollouts.program_outputs import stored_outputs
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.sampling import ChatSampler, SamplingParams
from cobalt.orchestrator.store.repo_turns import TurnRow
from cobalt.shared.clients import AsyncExecutorClient
from cobalt.shared.contracts import Compare, Limits, ProblemRow
from cobalt.shared.defaults import HISTORY_CAP_CHARS

__all__ = ["RolloutSpec", "RunCancelled", "TurnStore", "roll_out_problem"]


@dataclass(frozen=True, slots=True)
class RolloutSpec:
    """What a run asks of every problem."""

    run_id: int
    n: int
    feedback_turns: int
    """Turns after turn 0 (0 for a sampling run)."""
    sampling: SamplingParams
    stop_on_pass: bool = False
    think_cap_chars: int = HISTORY_CAP_CHARS
    limits: Limits = field(default_factory=Limits)
    compare: Compare = Compare.COBALT

    def multi_turn(self) -> MultiTurnSpec:
        """The engine's settings: turn 0 and the feedback turns."""
        return MultiTurnSpec(
            max_turns=self.feedback_turns + 1,
            stop_on_pass=self.stop_on_pass,
            think_cap_chars=self.think_cap_chars,
            limits=self.limits,
            compare=self.compare,
        )


class TurnStore(Protocol):
    """Where a problem's turns are read from and written to (the database, in a job)."""

    def stored_turns(self, problem_id: int) -> dict[int, list[TurnRow]]:
        """Stored turns of every sample of the problem, each list by turn index."""
        ...

    def save(self, rows: Sequence[TurnRow]) -> None:
        """Write turns; those already stored are skipped."""
        ...

    def cancelled(self) -> bool:
        """Whether the run was cancelled, as the store last saw it (checked before each
        turn; a store may read the run's status when it saves, to spare a round trip)."""
        ...


class RunCancelled(Exception):
    """The run was cancelled while this problem was being rolled out."""


def turn_row(run_id: int, problem_id: int, turn: JudgedTurn) -> TurnRow:
    """The store's row of one judged turn."""
    sample = turn.sample
    return TurnRow(
        run_id=run_id,
        problem_id=problem_id,
        sample_index=turn.sample_index,
        turn_index=turn.turn_index,
        # Later prompts are rebuilt from the rows (conversation.messages_of_turns).
        messages=turn.messages if turn.turn_index == 0 else [],
        raw_response=sample.text,
        stored_response=turn.stored_response,
        code=turn.code,
        public_verdicts=turn.public_verdicts,
        public_passed=turn.public_passed,
        feedback=turn.feedback,
        model=sample.model,
        finish_reason=sample.finish_reason,
        prompt_token_ids=sample.prompt_token_ids,
        completion_token_ids=sample.completion_token_ids,
        completion_logprobs=sample.completion_logprobs,
        prompt_tokens=sample.prompt_tokens,
        completion_tokens=sample.completion_tokens,
        model_latency_ms=sample.latency_ms,
        exec_latency_ms=turn.exec_ms,
        policy_version=sample.policy_version,
        public_outputs=stored_outputs(turn.public),
    )


class _OrderedWriter:
    """Writes each turn's rows in the background, one batch after another.

    The next model request does not wait for the database commit (bench/rollouts.py: the
    commit was half of the orchestration time of a turn). Batches are written strictly in
    order, each after the previous one committed, so whatever a crash interrupts, the store
    holds a prefix of every trajectory, never a gap, and a retried job resumes after it.
    """

    def __init__(self, store: TurnStore) -> None:
        self._store = store
        self._last: asyncio.Task[None] | None = None

    def submit(self, rows: list[TurnRow]) -> None:
        self._last = asyncio.create_task(self._write_after(self._last, rows))

    async def _write_after(self, previous: asyncio.Task[None] | None, rows: list[TurnRow]) -> None:
        if previous is not None:
            await previous  # a failed write fails every later one: no gaps
        await asyncio.to_thread(self._store.save, rows)

    def raise_if_failed(self) -> None:
        """Raise the error of a write that already failed (no turn is worth sampling then)."""
        if self._last is not None and self._last.done():
            self._last.result()

    async def flush(self) -> None:
        """Wait until every submitted batch is written; raises a write's error."""
        if self._last is not None:
            await self._last

    async def settle(self) -> None:
        """Wait for the writes while another error is on its way out (that error wins)."""
        if self._last is not None:
            await asyncio.gather(self._last, return_exceptions=True)


class _StoreRecorder(TurnObserver):
    """Evaluation's side of the engine: every turn goes to the store, in order, and a
    cancelled run or a failed write stops the problem before its next turn."""

    def __init__(
        self,
        spec: RolloutSpec,
        problem_id: int,
        store: TurnStore,
        histories: dict[int, list[TurnRow]],
    ) -> None:
        self.spec = spec
        self.problem_id = problem_id
        self.store = store
        self.writer = _OrderedWriter(store)
        self.histories = histories

    def before_turn(self, turn_index: int) -> None:
        self.writer.raise_if_failed()
        if self.store.cancelled():
            raise RunCancelled(f"run {self.spec.run_id} was cancelled")

    async def record(self, batch: TurnBatch) -> None:
        rows = [turn_row(self.spec.run_id, self.problem_id, turn) for turn in batch.turns]
        self.writer.submit(rows)  # written in the background, in order
        for row in rows:
            self.histories[row.sample_index].append(row)


async def roll_out_problem(
    spec: RolloutSpec,
    problem_id: int,
    problem: ProblemRow,
    template: PromptTemplate,
    sampler: ChatSampler,
    executor: AsyncExecutorClient,
    store: TurnStore,
) -> dict[int, list[TurnRow]]:
    """Advance every trajectory of `problem` to its last turn; returns them all."""
    stored = await asyncio.to_thread(store.stored_turns, problem_id)
    histories = {i: list(stored.get(i, [])) for i in range(spec.n)}
    recorder = _StoreRecorder(spec, problem_id, store, histories)
    try:
        await run_turns(
            initial_messages=template.initial_messages(problem),
            n=spec.n,
            sampling=spec.sampling,
            spec=spec.multi_turn(),
            public_tests=problem.public_tests,
            template=template,
            sampler=sampler,
            executor=executor,
            observer=recorder,
            place=problem.external_id,
            # Each stored trajectory continues from the messages its turn 0 was sent (as
            # stored), so the prompts can always be rebuilt from the rows.
            resumed={
                i: [
                    PastTurn(row.messages, row.stored_response, row.feedback, row.public_passed)
                    for row in rows
                ]
                for i, rows in histories.items()
                if rows
            },
        )
    except BaseException:
        await recorder.writer.settle()
        raise
    await recorder.writer.flush()
    return histories
