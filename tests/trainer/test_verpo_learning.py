"""A short CPU run on a toy task: GRPO on VeRPO rewards makes the reward rise.

The same toy as test_learning.py (tests/trainer/toy_task.py: the tiny random Qwen2
samples 8 tokens per response in torch), but the reward is VeRPO's over five
"unit tests" of graded difficulty: the response holds the good token 7 at least 1, 2, 3
and 4 times, and holds no bad token 3. The random model passes the first at about 16%,
the other counts far more rarely and the no-bad test at about 85%; each group of 8
weighs the tests by how few of its responses passed them
(`cobalt.shared.reward.verpo_scores`). Twelve steps of 4 prompts x 8 samples must raise
the mean VeRPO reward and the share of tests passed well above where they started.
"""

from __future__ import annotations

import statistics

import torch
from transformers import Qwen2ForCausalLM

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.reward import verpo_scores
from cobalt.trainer.step import Rollouts, frozen_copy, make_optimizer, train_step
from tests.trainer.toy_task import BAD, GOOD, PROMPTS, sample_toy

THRESHOLDS = (1, 2, 3, 4)
STEPS = 12
"""Enough for the reward to rise (it reaches 1.0 by step 14 with this seed)."""


def unit_tests(response: list[int]) -> list[bool]:
    """The toy's per-test pass vector: graded counts of the good token, then no bad one."""
    good = response.count(GOOD)
    return [good >= k for k in THRESHOLDS] + [BAD not in response]


def sample(
    policy: Qwen2ForCausalLM, prompts: list[list[int]], n: int, generator: torch.Generator
) -> tuple[Rollouts, list[list[bool]]]:
    """The rollouts with each group's VeRPO rewards, and every response's pass vector."""
    samples = sample_toy(policy, prompts, n, generator)
    passes = [unit_tests(response) for response in samples.response_ids]
    rewards = []
    for start in range(0, len(passes), n):  # a group is the n responses to one prompt
        rewards += [score.reward for score in verpo_scores(passes[start : start + n])]
    rollouts = Rollouts(
        prompt_ids=samples.prompt_ids,
        response_ids=samples.response_ids,
        rewards=rewards,
        group_ids=samples.group_ids,
        old_log_probs=samples.log_probs,
    )
    return rollouts, passes


def test_grpo_on_verpo_rewards_raises_the_reward_on_a_toy_task(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    generator = torch.Generator().manual_seed(0)
    hyper = TrainerHyperparameters(
        lr=3e-3, n_samples=8, contexts_per_step=4, updates_per_step=2, kl_coef=1e-4
    )
    reference = frozen_copy(tiny_model)
    optimizer = make_optimizer(tiny_model, hyper)
    rewards, passed = [], []
    for _ in range(STEPS):
        rollouts, passes = sample(tiny_model, PROMPTS, hyper.n_samples, generator)
        rewards.append(statistics.fmean(rollouts.rewards))
        passed.append(statistics.fmean(sum(p) / len(p) for p in passes))
        train_step(tiny_model, reference, optimizer, rollouts, hyper)
    print("VeRPO reward per step:", [round(r, 3) for r in rewards])
    print("tests passed per step:", [round(p, 3) for p in passed])
    first, last = statistics.fmean(rewards[:3]), statistics.fmean(rewards[-3:])
    assert first < 0.2, rewards  # near chance: the good token is 1 in 48
    assert last > first + 0.3, rewards
    assert statistics.fmean(passed[-3:]) > statistics.fmean(passed[:3]) + 0.3, passed
