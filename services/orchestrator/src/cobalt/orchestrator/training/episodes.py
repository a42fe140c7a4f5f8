"""One multi-turn training group: n online episodes from a turn-0 context with the current
policy, each rewarded by its last turn (the `multi-turn` baseline of docs/method.md).

An episode is the evaluation loop's trajectory, sampled for training by the same engine
(`rollouts.engine.run_turns`): turn 0 answers the problem; each later turn sees the
conversation so far (answers keep their text after `</think>`, capped) plus the feedback
on the first failing public test, and an episode ends when its program passes every public
test (`stop_on_pass`) or after `max_turns` turns. Only what is recorded differs: the turns stay
in memory, and nothing is written until the group is scored. Its last program then runs
on the hidden tests too, and the Cobalt reward of that last response, over all tests, is
the episode's reward.

Every assistant turn becomes one ledger row with exactly the prompt and token ids the
policy was sampled with, and the episode's reward: the trainer puts the episode's
advantage on every turn's tokens (the loss on every assistant turn) and normalises over
the group's episodes, not its turns.

Infrastructure errors are never rewards: an episode with a `sandbox_error` in any turn's
public verdicts, or whose last program the sandbox failed to judge on the hidden tests
after `execution.judge_programs`' retries, is masked: none of its turns is written and it
counts in no group statistic (`ScoredGroup.masked`).

Why prev_best = 0 for the reward: the improvement term rewards a step over the best of a
context's history, and an episode's context is the problem alone (the turn-0 context,
prev_best 0), so the episode is judged by its final program's correctness and format.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from cobalt.orchestrator.rollouts.engine import (
    JudgedTurn,
    MultiTurnSpec,
    TurnBatch,
    TurnObserver,
    run_turns,
)
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.sampling import ChatSampler, Sample, SamplingParams
from cobalt.orchestrator.training.rollout import (
    GroupContext,
    ScoredGroup,
    checked_samples,
    ledger_rows,
)
from cobalt.shared.clients import AsyncExecutorClient
from cobalt.shared.execution import JUDGE_RETRIES, JudgedPrograms, judge_programs, unjudged_verdicts
from cobalt.shared.reward import RewardFormat, ScoreInput, TokenCounter, score_responses

__all__ = [
    "EpisodeRecorder",
    "EpisodeSpec",
    "masked_episodes",
    "roll_out_episodes",
    "run_hidden_tests",
    "sample_episodes",
]

EPISODE_PREV_BEST = 0.0
"""An episode starts from the problem alone (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class EpisodeSpec(MultiTurnSpec):
    """How long an episode runs and what its history keeps (the engine's settings, with
    the defaults of the multi-turn baseline)."""

    max_turns: int = 3
    """The most turns an episode has, turn 0 included (the bandit data's runs have 2
    feedback turns)."""
    stop_on_pass: bool = True
    """End an episode at its first program that passes every public test."""
    judge_retries: int = JUDGE_RETRIES
    """Re-runs on the hidden tests of a program the sandbox failed to judge."""


class EpisodeRecorder(TurnObserver):
    """Training's side of the engine: turns kept in memory, answers checked for training
    and the policy versions and phase times collected."""

    def __init__(self, n: int, endpoint: str) -> None:
        self.endpoint = endpoint
        self.episodes: list[list[JudgedTurn]] = [[] for _ in range(n)]
        self.versions: set[int | None] = set()
        self.seconds = {"generate": 0.0, "execute": 0.0, "score": 0.0}

    def sampled(self, samples: Sequence[Sample]) -> None:
        self.versions.update(checked_samples(samples, self.endpoint, one_version=False))

    async def record(self, batch: TurnBatch) -> None:
        self.seconds["generate"] += batch.sample_s
        self.seconds["execute"] += batch.judge_s
        for turn in batch.turns:
            self.episodes[turn.sample_index].append(turn)

    @property
    def oldest_version(self) -> int | None:
        """The group's policy version: the oldest that sampled any of its turns, so the
        staleness bound holds for every turn even if the weights changed mid-episode."""
        known = {version for version in self.versions if version is not None}
        return min(known) if known else None


async def sample_episodes(
    context: GroupContext,
    *,
    sampler: ChatSampler,
    executor: AsyncExecutorClient,
    params: SamplingParams,
    template: PromptTemplate,
    spec: EpisodeSpec,
) -> EpisodeRecorder:
    """`params.n` episodes of up to `spec.max_turns` turns, judged on the public tests only.

    Raises:
        ValueError: the context has no tests, fewer than 2 episodes or 0 turns are asked for.
        UpstreamError: the endpoint's answer cannot be trained on (`rollout.checked_samples`).
        CobaltError: the endpoint or the executor failed.
    """
    if not context.tests:
        raise ValueError(f"{context.context_key}: the problem has no tests to reward with")
    if params.n < 2:
        raise ValueError("a GRPO group needs n >= 2 episodes")
    if spec.max_turns < 1:
        raise ValueError("an episode needs at least one turn")
    recorder = EpisodeRecorder(params.n, sampler.endpoint.base_url)
    await run_turns(
        initial_messages=list(context.messages),
        n=params.n,
        sampling=params,
        spec=spec,
        public_tests=context.tests[: context.public_count],
        template=template,
        sampler=sampler,
        executor=executor,
        observer=recorder,
        place=context.context_key,
    )
    return recorder


def masked_episodes(
    episodes: Sequence[Sequence[JudgedTurn]], hidden_unjudged: Collection[tuple[int, int]]
) -> set[int]:
    """The episodes the sandbox failed to judge: a `sandbox_error` in any turn's public
    verdicts, or a turn, as (episode, turn), left unjudged on the hidden tests."""
    return {
        i
        for i, episode in enumerate(episodes)
        if any(unjudged_verdicts(t.public_verdicts) for t in episode)
        or any((i, turn) in hidden_unjudged for turn in range(len(episode)))
    }


async def run_hidden_tests(
    context: GroupContext,
    executor: AsyncExecutorClient,
    turns: Sequence[JudgedTurn],
    spec: EpisodeSpec,
) -> JudgedPrograms:
    """The turns' programs on the hidden tests (the engine ran only the public ones), by
    index in `turns`; a turn without a program has no response, nor one left unjudged."""
    return await judge_programs(
        executor,
        [turn.code for turn in turns],
        context.tests[context.public_count :],
        limits=spec.limits,
        compare=spec.compare,
        retries=spec.judge_retries,
    )


async def roll_out_episodes(
    context: GroupContext,
    *,
    sampler: ChatSampler,
    executor: AsyncExecutorClient,
    tokens: TokenCounter,
    params: SamplingParams,
    template: PromptTemplate,
    spec: EpisodeSpec,
    reward_format: RewardFormat = RewardFormat.REASONING,
) -> ScoredGroup:
    """`params.n` episodes of up to `spec.max_turns` turns, scored by their last turns.

    Raises: as `sample_episodes`.
    """
    recorder = await sample_episodes(
        context, sampler=sampler, executor=executor, params=params, template=template, spec=spec
    )
    episodes, seconds = recorder.episodes, recorder.seconds

    # The last program of each episode on the hidden tests: its pass rate is over all tests.
    started = time.perf_counter()
    last_turns = [episode[-1] for episode in episodes]
    judged = await run_hidden_tests(context, executor, last_turns, spec)
    hidden = judged.responses
    masked = masked_episodes(episodes, {(i, len(episodes[i]) - 1) for i in judged.unjudged})
    kept = [i for i in range(len(episodes)) if i not in masked]
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
                last_turns[i].sample.text,
                tests_passed=passed[i],
                tests_total=len(context.tests),
                prev_best=EPISODE_PREV_BEST,
                token_ids=last_turns[i].sample.completion_token_ids,
            )
            for i in kept
        ],
        tokens=tokens,
        reward_format=reward_format,
    )
    # Every turn of an episode keeps its public verdicts; the last adds its hidden ones.
    verdicts = {
        i: [t.public_verdicts for t in episodes[i][:-1]]
        + [last_turns[i].public_verdicts + [str(r.verdict) for r in hidden[i].results]]
        if i in hidden
        else [t.public_verdicts for t in episodes[i]]
        for i in kept
    }
    rows = ledger_rows(
        {i: [t.sample for t in episodes[i]] for i in kept},
        verdicts,
        dict(zip(kept, rewards, strict=True)),
    )
    seconds["score"] = time.perf_counter() - scoring
    return ScoredGroup(
        policy_version=recorder.oldest_version, samples=rows, seconds=seconds, masked=len(masked)
    )
