"""The toy task of the CPU learning tests: the tiny random Qwen2 as its own sampler.

Multinomial sampling in torch, with the sampled tokens' log-probabilities kept as the
sampler's, exactly as vLLM returns them. Each test puts its own reward on the samples.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from transformers import Qwen2ForCausalLM

GOOD, BAD = 7, 3
"""The token the toy rewards and the one it penalises."""
RESPONSE_TOKENS = 8
PROMPTS = [[11, 12, 13], [20, 21], [30, 31, 32, 33], [40]]


@dataclass
class ToySamples:
    """n responses per prompt, one list entry per response; `group_ids` names the prompt."""

    prompt_ids: list[list[int]] = field(default_factory=list)
    response_ids: list[list[int]] = field(default_factory=list)
    log_probs: list[list[float]] = field(default_factory=list)
    group_ids: list[int] = field(default_factory=list)


def sample_toy(
    policy: Qwen2ForCausalLM, prompts: list[list[int]], n: int, generator: torch.Generator
) -> ToySamples:
    """`n` responses of RESPONSE_TOKENS tokens to every prompt, in prompt order."""
    samples = ToySamples()
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
            samples.prompt_ids += [prompt] * n
            samples.response_ids += tokens[:, len(prompt) :].tolist()
            samples.log_probs += torch.cat(chosen_log_probs, dim=1).tolist()
            samples.group_ids += [group] * n
    return samples
