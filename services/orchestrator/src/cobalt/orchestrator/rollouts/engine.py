"""The multi-turn engine: the Cobalt method's turn t, for evaluation runs and for training.

Every trajectory of one problem advances turn by turn through four phases:

1. **sample**: turn 0 is one request with one choice per new trajectory (they share the
   prompt), or with a sampling seed one request per trajectory, each with its own seed
   (`request_seeds`: common random numbers across runs); each later turn sends, per
   active trajectory and all concurrently, the conversation so far
   (`conversation.next_turn_messages`: answers keep their text after `</think>`, capped)
   plus the feedback of the previous turn;
2. **judge**: the turn's programs run on the public tests in one executor batch call;
3. **feed back**: the first failing public test becomes the next turn's user message
   (`feedback.feedback_for_first_failure`);
4. **record**: the caller's `TurnObserver` receives the judged turn.

A trajectory stops at its last turn, or at its first program that passes every public test
when `stop_on_pass` is set. Evaluation runs (`loop.roll_out_problem`) record every turn in
the store and may resume from stored turns; multi-turn training (`training.episodes`)
keeps the turns in memory and rewards each episode's last one. Nothing else differs, so the
prompt and feedback at turn t have exactly one implementation.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from cobalt.orchestrator.rollouts.conversation import TurnRecord, next_turn_messages
from cobalt.orchestrator.rollouts.feedback import feedback_for_first_failure
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.request_seeds import request_seed
from cobalt.orchestrator.rollouts.sampling import ChatSampler, Sample, SamplingParams
from cobalt.shared.clients import AsyncExecutorClient
from cobalt.shared.contracts import Compare, ExecuteResponse, Limits, StoredTest
from cobalt.shared.defaults import HISTORY_CAP_CHARS
from cobalt.shared.execution import execute_programs
from cobalt.shared.extraction import extract_program, history_text

__all__ = [
    "JudgedTurn",
    "MultiTurnSpec",
    "PastTurn",
    "TurnBatch",
    "TurnObserver",
    "run_turns",
]


@dataclass(frozen=True, slots=True)
class MultiTurnSpec:
    """How far trajectories go and how their programs are judged."""

    max_turns: int
    """The most turns a trajectory has, turn 0 included (a run's feedback turns + 1)."""
    stop_on_pass: bool
    """End a trajectory at its first program that passes every public test."""
    think_cap_chars: int = HISTORY_CAP_CHARS
    limits: Limits | None = None
    compare: Compare = Compare.COBALT


@dataclass(frozen=True, slots=True)
class PastTurn:
    """What a turn already taken (e.g. read back from the store) leaves for the next ones."""

    messages: list[dict[str, str]]
    """The messages it was sent (only turn 0's are needed: later prompts are rebuilt)."""
    stored_response: str
    feedback: str
    public_passed: bool


@dataclass(frozen=True, slots=True)
class JudgedTurn:
    """One sampled and judged turn of one trajectory."""

    sample_index: int
    """Which trajectory of the problem."""
    turn_index: int
    """0: the answer to the problem alone; k: after k rounds of feedback."""
    messages: list[dict[str, str]]
    """Exactly the messages the model was sent."""
    sample: Sample
    """The answer, with its token ids, logprobs and the policy version that wrote it."""
    code: str | None
    """The program extracted from the answer (None: the answer held none)."""
    public: ExecuteResponse | None
    """Its results on the public tests (None: no program, or no public tests)."""
    feedback: str
    """The next turn's user message."""
    stored_response: str
    """The answer as the history keeps it (thinking removed, capped)."""
    exec_ms: float
    """Wall time of the turn's executor batch (0 for a turn without a program)."""

    @property
    def public_passed(self) -> bool:
        return self.code is not None and (
            self.public is None or self.public.passed == self.public.total
        )

    @property
    def public_verdicts(self) -> list[str]:
        return [str(r.verdict) for r in self.public.results] if self.public else []

    def past(self) -> PastTurn:
        return PastTurn(self.messages, self.stored_response, self.feedback, self.public_passed)


@dataclass(frozen=True, slots=True)
class TurnBatch:
    """The judged turns of one turn index, with the wall time of each phase."""

    turns: list[JudgedTurn]
    sample_s: float
    judge_s: float


class TurnObserver:
    """What a caller does around the phases; the defaults do nothing."""

    def before_turn(self, turn_index: int) -> None:
        """Called before each later turn is sampled; raise to stop (e.g. a cancelled run)."""

    def sampled(self, samples: Sequence[Sample]) -> None:
        """Called with each sampling phase's answers before they are judged; raise to refuse."""

    async def record(self, batch: TurnBatch) -> None:
        """Called with each turn's judged batch, in turn order."""


@dataclass(slots=True)
class _Trajectory:
    past: list[PastTurn] = field(default_factory=list)

    def is_active(self, turn_index: int, stop_on_pass: bool) -> bool:
        return len(self.past) == turn_index and not (stop_on_pass and self.past[-1].public_passed)


async def _judge(
    pending: Sequence[tuple[int, int, list[dict[str, str]], Sample]],
    *,
    public_tests: Sequence[StoredTest],
    template: PromptTemplate,
    executor: AsyncExecutorClient,
    spec: MultiTurnSpec,
) -> list[JudgedTurn]:
    """Run each pending answer's program on the public tests and write its feedback."""
    codes = [extract_program(sample.text) for _, _, _, sample in pending]
    started = time.perf_counter()
    merged = await execute_programs(
        executor, codes, public_tests, limits=spec.limits, compare=spec.compare
    )
    exec_ms = (time.perf_counter() - started) * 1000
    return [
        JudgedTurn(
            sample_index=sample_index,
            turn_index=turn_index,
            messages=messages,
            sample=sample,
            code=codes[i],
            public=merged.get(i),
            feedback=feedback_for_first_failure(template, public_tests, codes[i], merged.get(i)),
            stored_response=history_text(sample.text, spec.think_cap_chars),
            exec_ms=exec_ms if codes[i] is not None else 0.0,
        )
        for i, (sample_index, turn_index, messages, sample) in enumerate(pending)
    ]


async def run_turns(
    *,
    initial_messages: list[dict[str, str]],
    n: int,
    sampling: SamplingParams,
    spec: MultiTurnSpec,
    public_tests: Sequence[StoredTest],
    template: PromptTemplate,
    sampler: ChatSampler,
    executor: AsyncExecutorClient,
    observer: TurnObserver,
    resumed: Mapping[int, Sequence[PastTurn]] | None = None,
    place: str = "",
) -> None:
    """Advance `n` trajectories of one problem to their last turn.

    Args:
        initial_messages: Turn 0's messages for a trajectory that has no turn yet.
        n: Trajectories (sample indexes 0..n-1).
        sampling: Sampling parameters; `n` is set per request. With a `seed`, each
            request's seed is derived from it, `place`, the sample index and the turn.
        place: What these trajectories are of (the problem's external id; a training
            group's context and round), for the requests' seeds.
        resumed: Turns already taken per sample index (a resumed run); each such
            trajectory continues from the messages its own turn 0 was sent.
    """
    trajectories = {i: _Trajectory(list((resumed or {}).get(i, []))) for i in range(n)}

    async def judge_and_record(
        pending: list[tuple[int, int, list[dict[str, str]], Sample]], sample_s: float
    ) -> None:
        started = time.perf_counter()
        judged = await _judge(
            pending, public_tests=public_tests, template=template, executor=executor, spec=spec
        )
        judge_s = time.perf_counter() - started
        for turn in judged:
            trajectories[turn.sample_index].past.append(turn.past())
        await observer.record(TurnBatch(judged, sample_s=sample_s, judge_s=judge_s))

    def one_choice(sample_index: int, turn_index: int) -> SamplingParams:
        if sampling.seed is None:
            return replace(sampling, n=1)
        seed = request_seed(sampling.seed, place, sample_index, turn_index)
        return replace(sampling, n=1, seed=seed)

    missing = [i for i in range(n) if not trajectories[i].past]
    if missing and spec.max_turns > 0:
        started = time.perf_counter()
        if sampling.seed is None:
            samples = await sampler.sample(initial_messages, replace(sampling, n=len(missing)))
        else:  # each its own seed, whichever trajectories a resumed run still lacks
            answers = await asyncio.gather(
                *(sampler.sample(initial_messages, one_choice(i, 0)) for i in missing)
            )
            samples = [answer[0] for answer in answers]
        observer.sampled(samples)
        await judge_and_record(
            [(i, 0, initial_messages, s) for i, s in zip(missing, samples, strict=True)],
            time.perf_counter() - started,
        )
    for turn_index in range(1, spec.max_turns):
        observer.before_turn(turn_index)
        active = [i for i, t in trajectories.items() if t.is_active(turn_index, spec.stop_on_pass)]
        if not active:
            continue
        prompts = {
            i: next_turn_messages(
                trajectories[i].past[0].messages,
                [TurnRecord(t.stored_response, t.feedback) for t in trajectories[i].past],
            )
            for i in active
        }
        started = time.perf_counter()
        answers = await asyncio.gather(
            *(sampler.sample(prompts[i], one_choice(i, turn_index)) for i in active)
        )
        samples = [answer[0] for answer in answers]
        observer.sampled(samples)
        await judge_and_record(
            [(i, turn_index, prompts[i], s) for i, s in zip(active, samples, strict=True)],
            time.perf_counter() - started,
        )
