"""A short CPU run on a toy task: GRPO with Cobalt's step makes the reward rise.

The tiny random Qwen2 is the policy and its own sampler (multinomial sampling in torch,
the sampled tokens' log-probabilities kept as the sampler's, exactly as vLLM returns
them). The reward is the share of response tokens that are the "good" token 7, with a
small penalty for the "bad" token 3: a task the random model does at chance (1/48).
Twenty steps of 4 prompts x 8 samples, two updates each, must raise the mean reward
well above where it started.
"""

from __future__ import annotations

import statistics

import torch
from transformers import Qwen2ForCausalLM

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.step import Rollouts, frozen_copy, make_optimizer, train_step

GOOD, BAD = 7, 3
RESPONSE_TOKENS = 8


def reward(response: list[int]) -> float:
    return (response.count(GOOD) - 0.5 * response.count(BAD)) / len(response)


def sample(
    policy: Qwen2ForCausalLM, prompts: list[list[int]], n: int, generator: torch.Generator
) -> Rollouts:
    prompt_ids, response_ids, log_probs, groups = [], [], [], []
    policy.eval()
    with torch.no_grad():
        for group, prompt in enumerate(prompts):
            tokens = torch.tensor([prompt] * n)
            chosen_log_probs = []
            for _ in range(RESPONSE_TOKENS):
                logits = policy(input_ids=tokens).logits[:, -1].float()
                distribution = torch.log_softmax(logits, dim=-1)
                token = torch.multinomial(distribution.exp(), 1, generator=generator)
                chosen_log_probs.append(distribution.gather(1, token))
                tokens = torch.cat([tokens, token], dim=1)
            responses = tokens[:, len(prompt) :].tolist()
            sampled = torch.cat(chosen_log_probs, dim=1).tolist()
            prompt_ids += [prompt] * n
            response_ids += responses
            log_probs += sampled
            groups += [group] * n
    return Rollouts(
        prompt_ids=prompt_ids,
        response_ids=response_ids,
        rewards=[reward(r) for r in response_ids],
        group_ids=groups,
        old_log_probs=log_probs,
    )


def test_grpo_raises_the_reward_on_a_toy_task(tiny_model: Qwen2ForCausalLM) -> None:
    generator = torch.Generator().manual_seed(0)
    hyper = TrainerHyperparameters(
        lr=3e-3, n_samples=8, contexts_per_step=4, updates_per_step=2, kl_coef=1e-4
    )
    reference = frozen_copy(tiny_model)
    optimizer = make_optimizer(tiny_model, hyper)
    prompts = [[11, 12, 13], [20, 21], [30, 31, 32, 33], [40]]
    means = []
    for _ in range(20):
        rollouts = sample(tiny_model, prompts, hyper.n_samples, generator)
        means.append(statistics.fmean(rollouts.rewards))
        train_step(tiny_model, reference, optimizer, rollouts, hyper)
    first, last = statistics.fmean(means[:3]), statistics.fmean(means[-3:])
    assert first < 0.1  # about chance: 1/48 good tokens
    assert last > first + 0.3, means  # most sampled tokens are the good one by the end
