"""A short CPU run on a toy task: GRPO with Cobalt's step makes the reward rise.

The tiny random Qwen2 is the policy and its own sampler (tests/trainer/toy_task.py). The
reward is the share of response tokens that are the "good" token 7, with a small penalty
for the "bad" token 3: a task the random model does at chance (1/48).
Twenty steps of 4 prompts x 8 samples, two updates each, must raise the mean reward
well above where it started.
"""

from __future__ import annotations

import statistics

import torch
from transformers import Qwen2ForCausalLM

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.step import Rollouts, frozen_copy, make_optimizer, train_step
from tests.trainer.toy_task import BAD, GOOD, PROMPTS, sample_toy


def reward(response: list[int]) -> float:
    return (response.count(GOOD) - 0.5 * response.count(BAD)) / len(response)


def sample(
    policy: Qwen2ForCausalLM, prompts: list[list[int]], n: int, generator: torch.Generator
) -> Rollouts:
    samples = sample_toy(policy, prompts, n, generator)
    return Rollouts(
        prompt_ids=samples.prompt_ids,
        response_ids=samples.response_ids,
        rewards=[reward(r) for r in samples.response_ids],
        group_ids=samples.group_ids,
        old_log_probs=samples.log_probs,
    )


def test_grpo_raises_the_reward_on_a_toy_task(tiny_model: Qwen2ForCausalLM) -> None:
    generator = torch.Generator().manual_seed(0)
    hyper = TrainerHyperparameters(
        lr=3e-3, n_samples=8, contexts_per_step=4, updates_per_step=2, kl_coef=1e-4
    )
    reference = frozen_copy(tiny_model)
    optimizer = make_optimizer(tiny_model, hyper)
    means = []
    for _ in range(20):
        rollouts = sample(tiny_model, PROMPTS, hyper.n_samples, generator)
        means.append(statistics.fmean(rollouts.rewards))
        train_step(tiny_model, reference, optimizer, rollouts, hyper)
    first, last = statistics.fmean(means[:3]), statistics.fmean(means[-3:])
    assert first < 0.1  # about chance: 1/48 good tokens
    assert last > first + 0.3, means  # most sampled tokens are the good one by the end
