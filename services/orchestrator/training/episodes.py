"""One multi-turn training group: n online episodes from a turn-0 context with the current
policy, each rewarded by its last turn (the `multi-turn` baseline of METHOD.md).

An episode is the evaluation loop's trajectory, sampled for training: turn 0 answers the
problem; each later turn sees the conversation so far (answers keep their text after
`</think>`, capped, as in `rollouts.loop`) plus the feedback on the first failing public
test, and an episode ends when its program passes every public test (`stop_on_pass`) or
after `turns` turns. Its last program then runs on the hidden tests too, and the Cobalt
reward of that last response, over all tests, is the episode's reward.

Every assistant turn becomes one ledger row with exactly the prompt and token ids the
policy was sampled with, and the episode's reward: the trainer puts the episode's
advantage on every turn's tokens (the loss on every assistant turn) and normalises over
the group's episodes, not its turns.

Why prev_best = 0 for the reward: the improvement term rewards a step over the best of a
context's history, and an episode's context is the problem alone (the turn-0 context,
prev_best 0), so the episode is judged by its final program's correctness and format.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from cobalt.orchestrator.rollouts.conversation import TurnRecord, next_turn_messages
from cobalt.orchestrator.rollouts.feedback import (
    feedback_for_first_failure,
)
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.sampling import ChatSampler, Sample, SamplingParams
from cobalt.orchestrator.store.repo_training import SampleRow
from cobalt.orchestrator.training.rollout import GroupContext, ScoredGroup, checked_samples
from cobalt.shared.clients import AsyncExecutorClient
from cobalt.shared.contracts import Compare, ExecuteResponse, Limits
from cobalt.shared.execution import execute_programs
from cobalt.shared.extraction import DEFAULT_HISTORY_CAP_CHARS, extract_program, history_text
from cobalt.shared.reward import ScoreInput, TokenCounter, score_responses

__all__ = ["EpisodeSpec", "roll_out_episodes"]

EPISODE_PREV_BEST = 0.0
"""An episode starts from the problem alone (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class EpisodeSpec:
    """How long an episode runs and what its history keeps."""

    turns: int = 3
    """Turns per episode, turn 0 included (the bandit data's runs have 2 feedback turns)."""
    stop_on_pass: bool = True
    """End an episode at its first program that passes every public test."""
    think_cap_chars: int = DEFAULT_HISTORY_CAP_CHARS
    limits: Limits | None = None
    compare: Compare = Compare.COBALT


@dataclass(slots=True)
class _Turn:
    messages: list[dict[str, str]]
    sample: Sample
    code: str | None
    public: ExecuteResponse | None
    feedback: str

    @property
    def public_passed(self) -> bool:
        return self.code is not None and (
            self.public is None or self.public.passed == self.public.total
        )


@dataclass(slots=True)
class _Episode:
    turns: list[_Turn] = field(default_factory=list)
    finished: bool = False


async def _judge_turn(
    context: GroupContext,
    template: PromptTemplate,
    executor: AsyncExecutorClient,
    spec: EpisodeSpec,
    prompts: Sequence[list[dict[str, str]]],
    samples: Sequence[Sample],
) -> list[_Turn]:
    """Run each answer's program on the public tests and write the feedback it gets."""
    public_tests = context.tests[: context.public_count]
    codes = [extract_program(sample.text) for sample in samples]
    merged = await execute_programs(
        executor, codes, public_tests, limits=spec.limits, compare=spec.compare
    )
    return [
        _Turn(
            messages=prompt,
            sample=sample,
            code=codes[i],
            public=merged.get(i),
            feedback=feedback_for_first_failure(template, public_tests, codes[i], merged.get(i)),
        )
        for i, (prompt, sample) in enumerate(zip(prompts, samples, strict=True))
    ]


async def roll_out_episodes(
    context: GroupContext,
    *,
    sampler: ChatSampler,
    executor: AsyncExecutorClient,
    tokens: TokenCounter,
    params: SamplingParams,
    template: PromptTemplate,
    spec: EpisodeSpec,
) -> ScoredGroup:
    """`params.n` episodes of up to `spec.turns` turns, scored by their last turns.

    The group's policy version is the oldest that sampled any of its turns, so the
    staleness bound holds for every turn even if the weights changed mid-episode.

    Raises:
        ValueError: the context has no tests, fewer than 2 episodes or 0 turns are asked for.
        UpstreamError: the endpoint's answer cannot be trained on (`rollout.checked_samples`).
        CobaltError: the endpoint or the executor failed.
    """
    if not context.tests:
        raise ValueError(f"{context.context_key}: the problem has no tests to reward with")
    if params.n < 2:
        raise ValueError("a GRPO group needs n >= 2 episodes")
    if spec.turns < 1:
        raise ValueError("an episode needs at least one turn")
    seconds = {"generate": 0.0, "execute": 0.0, "score": 0.0}
    versions: set[int | None] = set()
    episodes = [_Episode() for _ in range(params.n)]
    endpoint = sampler.endpoint.base_url

    for turn in range(spec.turns):
        active = [i for i, episode in enumerate(episodes) if not episode.finished]
        if not active:
            break
        started = time.perf_counter()
        if turn == 0:
            prompts = [list(context.messages)] * params.n
            samples = await sampler.sample(prompts[0], params)
        else:
            prompts = [
                next_turn_messages(
                    context.messages,
                    [
                        TurnRecord(history_text(t.sample.text, spec.think_cap_chars), t.feedback)
                        for t in episodes[i].turns
                    ],
                )
                for i in active
            ]
            answers = await asyncio.gather(
                *(sampler.sample(prompt, replace(params, n=1)) for prompt in prompts)
            )
            samples = [answer[0] for answer in answers]
        versions.update(checked_samples(samples, endpoint, one_version=False))
        judging = time.perf_counter()
        seconds["generate"] += judging - started
        judged = await _judge_turn(context, template, executor, spec, prompts, samples)
        seconds["execute"] += time.perf_counter() - judging
        for i, result in zip(active, judged, strict=True):
            episode = episodes[i]
            episode.turns.append(result)
            if (spec.stop_on_pass and result.public_passed) or turn == spec.turns - 1:
                episode.finished = True

    # The last program of each episode on the hidden tests: its pass rate is over all tests.
    started = time.perf_counter()
    hidden_tests = context.tests[context.public_count :]
    last_turns = [episode.turns[-1] for episode in episodes]
    hidden = await execute_programs(
        executor,
        [t.code for t in last_turns],
        hidden_tests,
        limits=spec.limits,
        compare=spec.compare,
    )
    scoring = time.perf_counter()
    seconds["execute"] += scoring - started
    passed = [
        (t.public.passed if t.public else 0) + (hidden[i].passed if i in hidden else 0)
        if t.code is not None
        else 0
        for i, t in enumerate(last_turns)
    ]
    rewards = score_responses(
        [
            ScoreInput(
                t.sample.text,
                tests_passed=passed[i],
                tests_total=len(context.tests),
                prev_best=EPISODE_PREV_BEST,
                token_ids=t.sample.completion_token_ids,
            )
            for i, t in enumerate(last_turns)
        ],
        tokens=tokens,
    )
    rows = []
    for i, (episode, reward) in enumerate(zip(episodes, rewards, strict=True)):
        for index, t in enumerate(episode.turns):
            verdicts = [str(r.verdict) for r in t.public.results] if t.public else []
            if index == len(episode.turns) - 1 and i in hidden:
                verdicts += [str(r.verdict) for r in hidden[i].results]
            rows.append(
                SampleRow(
                    sample_index=i,
                    turn=index,
                    response=t.sample.text,
                    prompt_token_ids=t.sample.prompt_token_ids or [],
                    response_token_ids=t.sample.completion_token_ids or [],
                    response_logprobs=t.sample.completion_logprobs or [],
                    verdicts=verdicts,
                    reward=reward,
                )
            )
    seconds["score"] = time.perf_counter() - scoring
    known = {version for version in versions if version is not None}
    return ScoredGroup(policy_version=min(known) if known else None, samples=rows, seconds=seconds)
