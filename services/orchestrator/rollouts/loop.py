"""The multi-turn feedback loop for one problem: sample, run on public tests, feed back.

`roll_out_problem` advances every trajectory (sample) of one problem of one run to its
last turn. It starts from whatever the store already holds, so a retried or resumed job
continues where the previous attempt stopped, and every turn is written as soon as it is
judged (`TurnStore.save`, idempotent on (run, problem, sample, turn)), in the background
and in order while the next turn is sampled: a worker killed at any moment loses at most
the turns it had not written, leaves no gap, and writes none twice.

Turn 0 is one request with `n` choices (the samples share the prompt). Each later turn
sends, per trajectory, the conversation so far (assistant messages keep the text after
`</think>`, capped) plus the feedback of the previous turn, all trajectories of a turn
concurrently. Programs of a turn are judged in one executor batch call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from cobalt.orchestrator.rollouts.conversation import TurnRecord, next_turn_messages
from cobalt.orchestrator.rollouts.feedback import feedback_for_first_failure
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.sampling import ChatSampler, Sample, SamplingParams
from cobalt.orchestrator.store.repo_runs import TurnRow
from cobalt.shared.clients import AsyncExecutorClient
from cobalt.shared.contracts import (
    Compare,
    Limits,
    ProblemRow,
)
from cobalt.shared.execution import execute_programs
from cobalt.shared.extraction import extract_program, history_text

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
    think_cap_chars: int = 6000
    limits: Limits = field(default_factory=Limits)
    compare: Compare = Compare.COBALT


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


@dataclass(frozen=True, slots=True)
class _Pending:
    sample_index: int
    turn_index: int
    messages: list[dict[str, str]]
    sample: Sample


async def _judge(
    spec: RolloutSpec,
    problem_id: int,
    problem: ProblemRow,
    template: PromptTemplate,
    executor: AsyncExecutorClient,
    pending: Sequence[_Pending],
) -> list[TurnRow]:
    """Run each pending turn's program on the public tests and build its row."""
    codes = [extract_program(p.sample.text) for p in pending]
    started = time.perf_counter()
    merged = await execute_programs(
        executor, codes, problem.public_tests, limits=spec.limits, compare=spec.compare
    )
    exec_ms = (time.perf_counter() - started) * 1000
    rows = []
    for i, item in enumerate(pending):
        response = merged.get(i)
        verdicts = [str(r.verdict) for r in response.results] if response else []
        passed = codes[i] is not None and (response is None or response.passed == response.total)
        rows.append(
            TurnRow(
                run_id=spec.run_id,
                problem_id=problem_id,
                sample_index=item.sample_index,
                turn_index=item.turn_index,
                # Later prompts are rebuilt from the rows (conversation.messages_of_turns).
                messages=item.messages if item.turn_index == 0 else [],
                raw_response=item.sample.text,
                stored_response=history_text(item.sample.text, spec.think_cap_chars),
                code=codes[i],
                public_verdicts=verdicts,
                public_passed=passed,
                feedback=feedback_for_first_failure(
                    template, problem.public_tests, codes[i], response
                ),
                model=item.sample.model,
                finish_reason=item.sample.finish_reason,
                prompt_token_ids=item.sample.prompt_token_ids,
                completion_token_ids=item.sample.completion_token_ids,
                completion_logprobs=item.sample.completion_logprobs,
                prompt_tokens=item.sample.prompt_tokens,
                completion_tokens=item.sample.completion_tokens,
                model_latency_ms=item.sample.latency_ms,
                exec_latency_ms=exec_ms if codes[i] is not None else 0.0,
                policy_version=item.sample.policy_version,
            )
        )
    return rows


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
    initial = template.initial_messages(problem)
    stored = await asyncio.to_thread(store.stored_turns, problem_id)
    histories = {i: list(stored.get(i, [])) for i in range(spec.n)}

    writer = _OrderedWriter(store)

    async def judge_and_write(pending: list[_Pending]) -> None:
        rows = await _judge(spec, problem_id, problem, template, executor, pending)
        writer.submit(rows)
        for row in rows:
            histories[row.sample_index].append(row)

    try:
        missing = [i for i in range(spec.n) if not histories[i]]
        if missing:
            samples = await sampler.sample(initial, replace(spec.sampling, n=len(missing)))
            await judge_and_write(
                [
                    _Pending(i, 0, initial, sample)
                    for i, sample in zip(missing, samples, strict=True)
                ]
            )
        for turn in range(1, spec.feedback_turns + 1):
            writer.raise_if_failed()
            if store.cancelled():
                raise RunCancelled(f"run {spec.run_id} was cancelled")
            active = [
                i
                for i, history in histories.items()
                if len(history) == turn and not (spec.stop_on_pass and history[-1].public_passed)
            ]
            if not active:
                continue
            # Each trajectory continues from the messages its turn 0 was sent (as stored),
            # so the prompts can always be rebuilt from the rows.
            conversations = {
                i: next_turn_messages(
                    histories[i][0].messages,
                    [TurnRecord(t.stored_response, t.feedback) for t in histories[i]],
                )
                for i in active
            }
            answers = await asyncio.gather(
                *(sampler.sample(conversations[i], replace(spec.sampling, n=1)) for i in active)
            )
            await judge_and_write(
                [
                    _Pending(i, turn, conversations[i], answer[0])
                    for i, answer in zip(active, answers, strict=True)
                ]
            )
    except BaseException:
        await writer.settle()
        raise
    await writer.flush()
    return histories
