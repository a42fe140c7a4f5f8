"""One training group: n responses to one context at the current policy, run on every test
of the problem and scored with the Cobalt reward.

This is step 1 of a training step (issue text: "rollout workers take B contexts, ask the
inference service for n completions each at the current policy version (token ids and
logprobs kept), execute them on all tests, compute the Cobalt reward"). It is pure async
logic over injected clients; `training.jobs` loads the context, calls it and writes the
ledger.

Why the checks: the trainer trains on exactly the sampled token ids and uses the sampled
log-probabilities as the ratio's denominator, so an endpoint that does not return them
(not vLLM, or `vllm_extensions` off) cannot feed training; and all n responses must come
from one policy version, or the group's staleness would be ill-defined.

Infrastructure errors are never rewards: a response the sandbox failed to judge (after
`execution.judge_programs`' retries) is masked, left out of the group's rows, so it has no
gradient and no place in the group's statistics; `ScoredGroup.masked` counts it.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cobalt.orchestrator.rollouts.sampling import ChatSampler, Sample, SamplingParams
from cobalt.orchestrator.store.repo_training import SampleRow
from cobalt.shared.clients import AsyncExecutorClient
from cobalt.shared.contracts import Compare, Limits, StoredTest
from cobalt.shared.errors import UpstreamError
from cobalt.shared.execution import JUDGE_RETRIES, judge_programs
from cobalt.shared.extraction import extract_program
from cobalt.shared.reward import (
    RewardBreakdown,
    RewardFormat,
    ScoreInput,
    TokenCounter,
    score_responses,
)

__all__ = ["GroupContext", "ScoredGroup", "checked_samples", "ledger_rows", "roll_out_group"]


@dataclass(frozen=True, slots=True)
class GroupContext:
    """What a group is sampled for: a bandit context and its problem's tests.

    `tests` holds every test of the problem, public then hidden, because the reward's p is
    over all of them; the first `public_count` are public, the ones the feedback of
    multi-turn episodes shows.
    """

    context_key: str
    problem_id: int
    messages: list[dict[str, Any]]
    prev_best: float
    tests: Sequence[StoredTest]
    public_count: int


@dataclass(frozen=True, slots=True)
class ScoredGroup:
    """The scored samples of one group and the policy version that produced them."""

    policy_version: int | None
    """From the inference service's header; None from an endpoint that does not send it."""
    samples: list[SampleRow]
    seconds: dict[str, float]
    """Wall seconds per phase: generate, execute, score."""
    masked: int = 0
    """Responses (episodes) the sandbox failed to judge, left out of `samples`."""

    @property
    def trainable(self) -> bool:
        """Whether enough responses are left for a GRPO baseline (two or more)."""
        return len({sample.sample_index for sample in self.samples}) >= 2


def ledger_rows(
    episodes: Mapping[int, Sequence[Sample]],
    verdicts: Mapping[int, Sequence[Sequence[str]]],
    rewards: Mapping[int, RewardBreakdown],
) -> list[SampleRow]:
    """The ledger rows of a scored group, the one way every scorer writes them: one row per
    turn of each episode in `rewards` (a single-turn response is an episode of one turn),
    keyed by sample index, with the exact prompt and token ids the policy was sampled with,
    its turn's verdicts and its episode's reward. Episodes missing from `rewards` (masked)
    have no rows.
    """
    return [
        SampleRow(
            sample_index=index,
            turn=turn,
            response=sample.text,
            prompt_token_ids=sample.prompt_token_ids or [],
            response_token_ids=sample.completion_token_ids or [],
            response_logprobs=sample.completion_logprobs or [],
            verdicts=verdicts[index][turn],
            reward=reward,
        )
        for index, reward in rewards.items()
        for turn, sample in enumerate(episodes[index])
    ]


def checked_samples(
    samples: Sequence[Sample], endpoint: str, *, one_version: bool = True
) -> set[int | None]:
    """The policy versions of `samples`, after checking they can be trained on.

    `one_version`: the samples are the choices of one request, so they must share one.
    """
    for sample in samples:
        if (
            sample.prompt_token_ids is None
            or sample.completion_token_ids is None
            or sample.completion_logprobs is None
        ):
            raise UpstreamError(
                f"{endpoint} returned no token ids or logprobs; training needs them: serve "
                "the policy with `cobalt inference serve` (vLLM) and keep vllm_extensions on"
            )
        if len(sample.completion_logprobs) != len(sample.completion_token_ids):
            raise UpstreamError(f"{endpoint} returned a logprob count unlike its token count")
        if not sample.completion_token_ids:
            raise UpstreamError(f"{endpoint} returned an empty completion")
    versions = {sample.policy_version for sample in samples}
    if one_version and len(versions) != 1:
        raise UpstreamError(f"one request's choices came from policy versions {versions}")
    return versions


async def roll_out_group(
    context: GroupContext,
    *,
    sampler: ChatSampler,
    executor: AsyncExecutorClient,
    tokens: TokenCounter,
    params: SamplingParams,
    limits: Limits | None = None,
    compare: Compare = Compare.COBALT,
    reward_format: RewardFormat = RewardFormat.REASONING,
    judge_retries: int = JUDGE_RETRIES,
) -> ScoredGroup:
    """Sample `params.n` responses, run each program on every test, score each response
    (those the sandbox failed to judge after `judge_retries` re-runs are masked).

    Raises:
        ValueError: the context has no tests or fewer than 2 samples are asked for.
        UpstreamError: the endpoint's answer cannot be trained on (see the module).
        CobaltError: the endpoint or the executor failed.
    """
    if not context.tests:
        raise ValueError(f"{context.context_key}: the problem has no tests to reward with")
    if params.n < 2:
        raise ValueError("a GRPO group needs n >= 2 samples")
    started = time.perf_counter()
    samples = await sampler.sample(context.messages, params)
    version = checked_samples(samples, sampler.endpoint.base_url).pop()
    generated = time.perf_counter()

    codes = [extract_program(sample.text) for sample in samples]
    judged = await judge_programs(
        executor, codes, context.tests, limits=limits, compare=compare, retries=judge_retries
    )
    merged = judged.responses
    verdicts = {i: [str(r.verdict) for r in response.results] for i, response in merged.items()}
    passed = {i: response.passed for i, response in merged.items()}
    executed = time.perf_counter()
    kept = [(i, sample) for i, sample in enumerate(samples) if i not in judged.unjudged]

    rewards = score_responses(
        [
            ScoreInput(
                sample.text,
                tests_passed=passed.get(i, 0),
                tests_total=len(context.tests),
                prev_best=context.prev_best,
                token_ids=sample.completion_token_ids,
            )
            for i, sample in kept
        ],
        tokens=tokens,
        reward_format=reward_format,
    )
    rows = ledger_rows(
        {i: [sample] for i, sample in kept},
        {i: [verdicts.get(i, [])] for i, _ in kept},
        {i: reward for (i, _), reward in zip(kept, rewards, strict=True)},
    )
    scored = time.perf_counter()
    return ScoredGroup(
        policy_version=version,
        samples=rows,
        seconds={
            "generate": generated - started,
            "execute": executed - generated,
            "score": scored - executed,
        },
        masked=len(judged.unjudged),
    )
