"""The maths of one GRPO step, as plain functions over torch tensors.

Shapes: B sampled responses, T = the longest response in tokens. Every per-token tensor
is (B, T) and comes with `response_mask` (1 for a real response token, 0 for padding).

verl's `verl.trainer.ppo.core_algos` (0.9.1) supplies the pieces it has:

- `compute_grpo_outcome_advantage`: A_i = (r_i - mean(group)) / (std(group) + 1e-6),
  std with Bessel's correction (`torch.std`, divides by n - 1), broadcast over the
  response tokens;
- `compute_policy_loss_vanilla` (registry name "vanilla"): the clipped ratio loss with
  clip-higher and dual-clip, aggregated by `agg_loss`;
- `kl_penalty(..., "mse")`: the k2 estimator 0.5 * (log p - log p_ref)^2.

What this module adds around them: two guards on the advantages (below), the config
object verl's loss needs, and the weighted sum of policy loss, KL and entropy. The
formulas are written out in docs/trainer.md.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from verl.trainer.ppo import core_algos
from verl.workers.config import ActorConfig

from cobalt.shared.contracts.training import TrainerHyperparameters

__all__ = [
    "ADVANTAGE_EPSILON",
    "GrpoLossConfig",
    "grpo_loss",
    "group_advantages",
    "kl_to_reference",
    "masked_token_mean",
]

ADVANTAGE_EPSILON = 1e-6
"""Added to the group's standard deviation before dividing (docs/method.md)."""

LOSS_AGGREGATION = "token-mean"
"""Every token of the batch weighs the same: sum over valid tokens / their count."""


@dataclass(frozen=True)
class GrpoLossConfig:
    """The coefficients of the GRPO loss (defaults: docs/method.md's paper values)."""

    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.4
    dual_clip: float = 3.0
    kl_coef: float = 1e-4
    entropy_coef: float = 0.0

    @classmethod
    def from_settings(cls, settings: TrainerHyperparameters) -> GrpoLossConfig:
        return cls(
            clip_ratio_low=settings.clip_ratio_low,
            clip_ratio_high=settings.clip_ratio_high,
            dual_clip=settings.dual_clip,
            kl_coef=settings.kl_coef,
            entropy_coef=settings.entropy_coef,
        )


def masked_token_mean(values: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
    """Token-mean over the valid tokens of the whole batch (verl's `agg_loss`)."""
    return core_algos.agg_loss(
        loss_mat=values, loss_mask=response_mask, loss_agg_mode=LOSS_AGGREGATION
    )


def group_advantages(
    rewards: torch.Tensor,
    group_ids: Sequence[Hashable],
    response_mask: torch.Tensor,
    epsilon: float = ADVANTAGE_EPSILON,
) -> torch.Tensor:
    """Per-token advantages (B, T): each response's normalised reward on its valid tokens.

    `rewards` holds one scalar per response (B,); `group_ids[i]` names the context that
    response i was sampled for. Two guards on top of verl's function:

    - a group whose rewards are all equal gets advantage exactly 0. verl computes
      (r - mean) / (std + 1e-6) in float32, where the mean of 16 copies of 0.7 is off by a
      rounding error and std is ~6e-8, so every sample would get +0.056 instead of 0;
    - a group of one response is refused: verl would use mean 0 and std 1 there, i.e. the
      raw reward, which is not GRPO.
    """
    if rewards.dim() != 1 or rewards.shape[0] != response_mask.shape[0]:
        raise ValueError(f"rewards must be (B,) for B={response_mask.shape[0]} responses")
    if len(group_ids) != rewards.shape[0]:
        raise ValueError(f"{len(group_ids)} group ids for {rewards.shape[0]} responses")
    members: dict[Hashable, list[int]] = {}
    for row, group in enumerate(group_ids):
        members.setdefault(group, []).append(row)
    singletons = [group for group, rows in members.items() if len(rows) == 1]
    if singletons:
        raise ValueError(f"groups with a single response have no baseline: {singletons[:5]}")

    # verl sums token-level rewards over the response; put each outcome reward on one token.
    mask = response_mask.to(rewards.dtype)
    token_level_rewards = torch.zeros_like(mask)
    token_level_rewards[:, 0] = rewards
    index = np.empty(len(group_ids), dtype=object)
    index[:] = list(group_ids)
    advantages, _returns = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=token_level_rewards,
        response_mask=mask,
        index=index,
        epsilon=epsilon,
        norm_adv_by_std_in_grpo=True,
    )
    for rows in members.values():
        group_rewards = rewards[rows]
        if bool((group_rewards == group_rewards[0]).all()):
            advantages[rows] = 0.0
    return advantages


def kl_to_reference(
    log_probs: torch.Tensor, ref_log_probs: torch.Tensor, response_mask: torch.Tensor
) -> torch.Tensor:
    """Token-mean k2 estimate of KL(policy || reference): 0.5 * (log p - log p_ref)^2."""
    per_token = core_algos.kl_penalty(log_probs, ref_log_probs, kl_penalty="mse")
    return masked_token_mean(per_token, response_mask)


def _verl_actor_config(config: GrpoLossConfig) -> ActorConfig:
    """The config object `compute_policy_loss_vanilla` reads its clip ranges from.

    verl's loss asserts a config is given and reads `clip_ratio`, `clip_ratio_low`,
    `clip_ratio_high`, `clip_ratio_c` and `global_batch_info` from it. `ActorConfig`
    validates on construction, so it also needs a strategy, a micro-batch size and
    `rollout_n`; those values are not used by the loss. An empty `global_batch_info`
    makes token-mean divide by this batch's own valid-token count.
    """
    return ActorConfig(
        strategy="fsdp",
        ppo_micro_batch_size_per_gpu=1,
        rollout_n=1,
        clip_ratio=config.clip_ratio_low,
        clip_ratio_low=config.clip_ratio_low,
        clip_ratio_high=config.clip_ratio_high,
        clip_ratio_c=config.dual_clip,
        loss_agg_mode=LOSS_AGGREGATION,
    )


def grpo_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    config: GrpoLossConfig,
    ref_log_probs: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
    is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """The GRPO loss to minimise, and its metrics.

    loss = policy loss + kl_coef * KL(policy || reference) - entropy_coef * entropy,
    every term a token-mean over the valid tokens of the batch. `log_probs` (and
    `entropy`, per token) carry the gradient; the others are constants. The reference
    term needs `ref_log_probs` whenever `kl_coef` > 0. `is_weights` (B, T), when given,
    multiply each token's policy loss before the token-mean (truncated importance
    sampling, offpolicy.py; verl's `rollout_is_weights`); tokens masked out by MIS are
    0 in `response_mask`.

    Metrics: `pg_clipfrac` (share of tokens where the clipped term was chosen),
    `pg_clipfrac_lower` (share where dual-clip capped a negative-advantage token),
    `ppo_kl` (mean of log p_old - log p, an estimate of KL(old || new)), `kl_ref`,
    `entropy` (when given), and the parts of the loss.
    """
    policy_loss_fn = core_algos.get_policy_loss_fn("vanilla")
    pg_loss, verl_metrics = policy_loss_fn(
        old_log_prob=old_log_probs,
        log_prob=log_probs,
        advantages=advantages,
        response_mask=response_mask,
        loss_agg_mode=LOSS_AGGREGATION,
        config=_verl_actor_config(config),
        rollout_is_weights=is_weights,
    )
    loss = pg_loss
    metrics = {
        "pg_loss": float(pg_loss.detach()),
        "pg_clipfrac": float(verl_metrics["actor/pg_clipfrac"]),
        "pg_clipfrac_lower": float(verl_metrics["actor/pg_clipfrac_lower"]),
        "ppo_kl": float(verl_metrics["actor/ppo_kl"]),
    }
    if ref_log_probs is not None:
        kl_ref = kl_to_reference(log_probs, ref_log_probs, response_mask)
        loss = loss + config.kl_coef * kl_ref
        metrics["kl_ref"] = float(kl_ref.detach())
    elif config.kl_coef > 0:
        raise ValueError("kl_coef > 0 needs the reference policy's log-probabilities")
    if entropy is not None:
        mean_entropy = masked_token_mean(entropy, response_mask)
        loss = loss - config.entropy_coef * mean_entropy
        metrics["entropy"] = float(mean_entropy.detach())
    elif config.entropy_coef > 0:
        raise ValueError("entropy_coef > 0 needs the per-token entropy")
    metrics["loss"] = float(loss.detach())
    return loss, metrics
