"""One GRPO training step on a Hugging Face causal LM, top to bottom.

Input: the step's sampled responses (`Rollouts`: prompt and response token ids, the
sampler's log-probabilities, one reward each, and the context each was sampled for).
`train_step` then:

1. pads prompt + response into one right-padded batch (`pack`);
2. computes group-normalised advantages over the whole step (`grpo.group_advantages`),
   one per episode (a multi-turn episode's turns share it; otherwise one per response);
3. splits the groups into `updates_per_step` mini-batches, and for each one:
   new log-probabilities of exactly the sampled response tokens (with gradient), the
   frozen reference's log-probabilities (without), the loss (`grpo.grpo_loss`),
   backward, global-norm gradient clipping, one AdamW update.

The model stays in memory in float32 or whatever dtype it was loaded in; there is no
micro-batching, so one mini-batch must fit in one forward pass.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import torch

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.distributed import all_reduce_token_weighted, rank_and_size
from cobalt.trainer.grpo import GrpoLossConfig, group_advantages, grpo_loss

__all__ = [
    "PackedBatch",
    "Rollouts",
    "frozen_copy",
    "make_optimizer",
    "pack",
    "response_log_probs",
    "episode_advantages",
    "train_step",
]


@dataclass(frozen=True)
class Rollouts:
    """A step's sampled responses, one list entry per response."""

    prompt_ids: Sequence[Sequence[int]]
    response_ids: Sequence[Sequence[int]]
    rewards: Sequence[float]
    group_ids: Sequence[Hashable]
    """The context each response was sampled for; GRPO normalises rewards within it."""
    old_log_probs: Sequence[Sequence[float]] | None = None
    """Log-probability of each response token under the sampling policy. None: computed
    by the policy itself at the start of the step (before any update)."""
    episode_ids: Sequence[Hashable] | None = None
    """The episode each response belongs to (multi-turn: every assistant turn of an
    episode is a response with the episode's reward). GRPO normalises over a group's
    episodes, each counted once, and puts an episode's advantage on all of its turns.
    None: every response is its own episode."""

    def __post_init__(self) -> None:
        sizes = {len(self.prompt_ids), len(self.response_ids), len(self.rewards)}
        sizes.add(len(self.group_ids))
        if self.episode_ids is not None:
            sizes.add(len(self.episode_ids))
        if len(sizes) != 1:
            raise ValueError(
                "prompt_ids, response_ids, rewards, group_ids, episode_ids differ in length"
            )
        if self.episode_ids is not None:
            seen: dict[Hashable, tuple[float, Hashable]] = {}
            for i, episode in enumerate(self.episode_ids):
                first = seen.setdefault(episode, (self.rewards[i], self.group_ids[i]))
                if first != (self.rewards[i], self.group_ids[i]):
                    raise ValueError(f"episode {episode!r}: its turns differ in reward or group")
        for i, response in enumerate(self.response_ids):
            if not response or not self.prompt_ids[i]:
                raise ValueError(f"response {i} has an empty prompt or response")
            if self.old_log_probs is not None and len(self.old_log_probs[i]) != len(response):
                raise ValueError(f"response {i}: old_log_probs and response_ids differ in length")


@dataclass(frozen=True)
class PackedBatch:
    """Prompt + response per row, right-padded, plus where each response sits."""

    input_ids: torch.Tensor  # (B, L) prompt, then response, then padding
    attention_mask: torch.Tensor  # (B, L) 1 on prompt and response tokens
    response_positions: torch.Tensor  # (B, T) index in input_ids of each response token
    response_ids: torch.Tensor  # (B, T) the response tokens (pad_id after the end)
    response_mask: torch.Tensor  # (B, T) 1 on real response tokens

    def rows(self, index: torch.Tensor) -> PackedBatch:
        return PackedBatch(
            input_ids=self.input_ids[index],
            attention_mask=self.attention_mask[index],
            response_positions=self.response_positions[index],
            response_ids=self.response_ids[index],
            response_mask=self.response_mask[index],
        )


def pack(rollouts: Rollouts, pad_id: int) -> PackedBatch:
    """Right-pad prompt + response of every row into one batch."""
    lengths = [
        len(p) + len(r) for p, r in zip(rollouts.prompt_ids, rollouts.response_ids, strict=True)
    ]
    batch, width = len(lengths), max(lengths)
    longest_response = max(len(r) for r in rollouts.response_ids)
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((batch, width), dtype=torch.long)
    positions = torch.zeros((batch, longest_response), dtype=torch.long)
    response_ids = torch.full((batch, longest_response), pad_id, dtype=torch.long)
    response_mask = torch.zeros((batch, longest_response), dtype=torch.float32)
    for row, (prompt, response) in enumerate(
        zip(rollouts.prompt_ids, rollouts.response_ids, strict=True)
    ):
        start, end = len(prompt), len(prompt) + len(response)
        input_ids[row, :end] = torch.tensor([*prompt, *response])
        attention_mask[row, :end] = 1
        positions[row, : len(response)] = torch.arange(start, end)
        response_ids[row, : len(response)] = torch.tensor(list(response))
        response_mask[row, : len(response)] = 1.0
    return PackedBatch(input_ids, attention_mask, positions, response_ids, response_mask)


def response_log_probs(
    model: torch.nn.Module, batch: PackedBatch
) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probability and entropy (B, T) of each response token given everything before it.

    The logits at position t predict token t + 1, so a response token at position p is
    scored by the logits at p - 1. Only those rows of the logits go through log_softmax.
    Padding positions hold values but are masked out by `response_mask` everywhere.
    """
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    predicting = (batch.response_positions - 1).clamp(min=0)
    vocab = logits.shape[-1]
    response_logits = logits.gather(1, predicting.unsqueeze(-1).expand(-1, -1, vocab))
    log_softmax = torch.log_softmax(response_logits.float(), dim=-1)
    log_probs = log_softmax.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)
    entropy = -(log_softmax.exp() * log_softmax).sum(dim=-1)
    return log_probs, entropy


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """The reference policy: a copy of the starting weights that never trains."""
    reference = copy.deepcopy(model).eval()
    for parameter in reference.parameters():
        parameter.requires_grad_(False)
    return reference


def make_optimizer(
    model: torch.nn.Module, settings: TrainerHyperparameters
) -> torch.optim.Optimizer:
    """AdamW at a constant learning rate with decoupled weight decay."""
    return torch.optim.AdamW(model.parameters(), lr=settings.lr, weight_decay=settings.weight_decay)


def episode_advantages(rollouts: Rollouts, response_mask: torch.Tensor) -> torch.Tensor:
    """Per-token advantages (B, T): GRPO over the episodes, each episode's on its turns."""
    episode_ids = rollouts.episode_ids
    if episode_ids is None:
        episode_ids = range(len(rollouts.rewards))
    first_row: dict[Hashable, int] = {}  # episode -> its first response's row
    for row, episode in enumerate(episode_ids):
        first_row.setdefault(episode, row)
    position = {episode: k for k, episode in enumerate(first_row)}
    row_episode = torch.tensor([position[episode] for episode in episode_ids])
    firsts = list(first_row.values())
    rewards = torch.tensor([float(rollouts.rewards[row]) for row in firsts], dtype=torch.float32)
    per_episode = group_advantages(
        rewards, [rollouts.group_ids[row] for row in firsts], torch.ones((len(firsts), 1))
    )[:, 0]
    return per_episode[row_episode].unsqueeze(-1) * response_mask


def _pad_rows(rows: Sequence[Sequence[float]], width: int) -> torch.Tensor:
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.tensor(list(row), dtype=torch.float32)
    return out


def _mini_batches(group_ids: Sequence[Hashable], count: int) -> list[torch.Tensor]:
    """Row indices of `count` mini-batches; a group never straddles two of them."""
    groups = list(dict.fromkeys(group_ids))
    per_batch = math.ceil(len(groups) / count)
    batches = []
    for first in range(0, len(groups), per_batch):
        chosen = set(groups[first : first + per_batch])
        batches.append(torch.tensor([i for i, g in enumerate(group_ids) if g in chosen]))
    return batches


def train_step(
    policy: torch.nn.Module,
    reference: torch.nn.Module | None,
    optimizer: torch.optim.Optimizer,
    rollouts: Rollouts,
    settings: TrainerHyperparameters,
    pad_id: int = 0,
) -> list[dict[str, float]]:
    """One GRPO step: `settings.updates_per_step` AdamW updates; metrics of each update
    (with the step's advantage statistics, which all updates share)."""
    config = GrpoLossConfig.from_settings(settings)
    if reference is None and config.kl_coef > 0:
        raise ValueError("kl_coef > 0 needs a reference model (frozen_copy of the start)")
    batch = pack(rollouts, pad_id)
    advantages = episode_advantages(rollouts, batch.response_mask)
    per_response = advantages[:, 0]  # (B,) the same value sits on every token of a row
    advantage_stats = {
        "advantage_mean": float(per_response.mean()),
        "advantage_abs_mean": float(per_response.abs().mean()),
        "advantage_zero_fraction": float((per_response == 0).float().mean()),
    }

    # With several ranks each takes every world-th row of a mini-batch (distributed.py).
    rank, world = rank_and_size()
    minis = _mini_batches(rollouts.group_ids, settings.updates_per_step)
    if any(len(rows) < world for rows in minis):
        raise ValueError(f"a mini-batch has fewer rows than the {world} ranks sharing it")
    shards = [rows[rank::world] for rows in minis]

    # The ratio's denominator: the sampler's log-probs, or the policy before this step.
    if rollouts.old_log_probs is not None:
        old_log_probs = _pad_rows(rollouts.old_log_probs, batch.response_ids.shape[1])
    else:
        old_log_probs = torch.zeros_like(batch.response_mask)
        with torch.no_grad():
            for local in shards:
                old_log_probs[local] = response_log_probs(policy, batch.rows(local))[0]

    metrics = []
    policy.train()
    for rows, local in zip(minis, shards, strict=True):
        mini = batch.rows(local)
        log_probs, entropy = response_log_probs(policy, mini)
        ref_log_probs = None
        if reference is not None:
            with torch.no_grad():
                ref_log_probs, _ = response_log_probs(reference, mini)
        loss, update_metrics = grpo_loss(
            log_probs=log_probs,
            old_log_probs=old_log_probs[local],
            advantages=advantages[local],
            response_mask=mini.response_mask,
            config=config,
            ref_log_probs=ref_log_probs,
            entropy=entropy if config.entropy_coef > 0 else entropy.detach(),
        )
        # Token-mean over the whole mini-batch: this rank's share of its tokens, times the
        # ranks FSDP averages the gradients over (1 in a single process).
        local_tokens = float(mini.response_mask.sum())
        global_tokens = float(batch.response_mask[rows].sum())
        optimizer.zero_grad(set_to_none=True)
        (loss * (local_tokens * world / global_tokens)).backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.grad_clip)
        optimizer.step()
        update_metrics = all_reduce_token_weighted(update_metrics, local_tokens, global_tokens)
        # Under FSDP the norm is a DTensor; its full value is the same on every rank.
        norm = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
        update_metrics["grad_norm"] = float(norm)
        update_metrics["responses"] = float(len(rows))
        metrics.append(update_metrics | advantage_stats)
    return metrics
