"""Off-policy correction: the sampler's policy against the trainer's old policy.

Three policies take part in a step (decoupled PPO, as verl's rollout correction and
slime's TIS/MIS name them): pi_sampler, which sampled the tokens (vLLM, in its own dtype
and kernels, as far behind as the orchestrator's off-policy window lets it); pi_old, the
trainer's weights before the step's first update, recomputed when
`recompute_old_log_probs` is set; pi_theta, the weights being updated. Per response token

    delta = log pi_old - log pi_sampler,    rho = exp(delta)

measures how far the two disagree on a token that was actually sampled. The step logs
delta's token-mean and largest magnitude, and the k3 estimate of KL(pi_sampler || pi_old),
exp(delta) - 1 - delta averaged over the tokens (unbiased, since the tokens were drawn
from pi_sampler). Two corrections of the PPO loss, at the token level:

- TIS (`tis_cap` C): each token's loss is multiplied by min(rho, C), a constant;
- MIS (`mis_threshold` C): a token with rho outside [1/C, C] is left out of the loss, its
  gradient and the token-mean's denominator.

Token level, not sequence level: the product of a response's ratios (sequence-level IS,
unbiased) has a variance that grows exponentially with its length, and the paper's
responses run to 6,144 tokens, where a cap of 2 would truncate nearly every sequence to
the cap; the mismatch between two engines on the same weights is per token (rounding in
one kernel's logits), and so is the correction. verl's `decoupled_token_is` preset and
the original TIS make the same choice. Log-ratios are clamped to [-20, 20] before the
exponential (verl's safety bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from cobalt.shared.contracts.training import TrainerHyperparameters

__all__ = ["LOG_RATIO_BOUND", "OffPolicyCorrection", "TokenCorrection", "mismatch_metrics"]

LOG_RATIO_BOUND = 20.0
"""Log-ratios are clamped to [-this, this] before exp (rho in [2e-9, 5e8])."""


@dataclass(frozen=True)
class TokenCorrection:
    """What the correction does to one response's tokens (1-D, one entry per token)."""

    weights: torch.Tensor | None
    """min(rho, C) per token under TIS (a constant); None: every token weighs 1."""
    kept: torch.Tensor
    """1.0 on tokens the loss keeps, 0.0 on those MIS masks out (float32)."""


@dataclass(frozen=True)
class OffPolicyCorrection:
    """The correction a job asked for (`TrainerHyperparameters`)."""

    tis_cap: float | None = None
    mis_threshold: float | None = None

    @classmethod
    def from_settings(cls, settings: TrainerHyperparameters) -> OffPolicyCorrection:
        return cls(tis_cap=settings.tis_cap, mis_threshold=settings.mis_threshold)

    @property
    def active(self) -> bool:
        return self.tis_cap is not None or self.mis_threshold is not None

    def tokens(
        self, old_log_probs: torch.Tensor, sampler_log_probs: torch.Tensor
    ) -> TokenCorrection:
        """The weights and mask of the tokens whose log-probabilities are given."""
        ratio = _ratio(old_log_probs, sampler_log_probs)
        weights = None if self.tis_cap is None else ratio.clamp(max=self.tis_cap)
        kept = torch.ones_like(ratio)
        if self.mis_threshold is not None:
            inside = (ratio <= self.mis_threshold) & (ratio >= 1.0 / self.mis_threshold)
            kept = inside.to(torch.float32)
        return TokenCorrection(weights=weights, kept=kept)


def _ratio(old_log_probs: torch.Tensor, sampler_log_probs: torch.Tensor) -> torch.Tensor:
    delta = (old_log_probs - sampler_log_probs).to(torch.float32)
    return delta.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND).exp()


MISMATCH_SUMS = (
    "tokens",
    "log_ratio",
    "kl_k3",
    "is_weight",
    "truncated",
    "masked",
)
"""The per-token sums `mismatch_metrics` adds up (over ranks too), in this order."""


def mismatch_sums(
    old_log_probs: Sequence[torch.Tensor],
    sampler_log_probs: Sequence[torch.Tensor],
    correction: OffPolicyCorrection,
) -> tuple[list[float], float]:
    """Sums over the tokens of the given responses (`MISMATCH_SUMS`' order), and the
    largest |delta|: what ranks add up (and take the maximum of) before dividing."""
    sums = [0.0] * len(MISMATCH_SUMS)
    largest = 0.0
    for old, sampler in zip(old_log_probs, sampler_log_probs, strict=True):
        if old.numel() == 0:
            continue
        delta = (old - sampler).to(torch.float64)
        bounded = delta.clamp(-LOG_RATIO_BOUND, LOG_RATIO_BOUND)
        corrected = correction.tokens(old, sampler)
        weights = corrected.weights if corrected.weights is not None else torch.ones_like(delta)
        truncated = (
            (_ratio(old, sampler) > correction.tis_cap).sum()
            if correction.tis_cap is not None
            else torch.tensor(0)
        )
        row = (
            float(delta.numel()),
            float(delta.sum()),
            float((bounded.exp() - 1.0 - bounded).sum()),
            float((weights.to(torch.float64) * corrected.kept).sum()),
            float(truncated),
            float((1.0 - corrected.kept).sum()),
        )
        sums = [total + value for total, value in zip(sums, row, strict=True)]
        largest = max(largest, float(delta.abs().max()))
    return sums, largest


def mismatch_metrics(sums: Sequence[float], largest: float) -> dict[str, float]:
    """The step's `mismatch_*` metrics from the sums over its tokens (all ranks):

    - `mismatch_log_ratio_mean`: token-mean of delta = log pi_old - log pi_sampler;
    - `mismatch_log_ratio_abs_max`: the largest |delta| of the step;
    - `mismatch_kl_k3`: k3 estimate of KL(pi_sampler || pi_old), token-mean;
    - `mismatch_is_weight_mean`: mean weight of the kept tokens (1 without TIS);
    - `mismatch_truncated_fraction`: share of tokens whose weight TIS capped;
    - `mismatch_masked_fraction`: share of tokens MIS left out.
    """
    totals = dict(zip(MISMATCH_SUMS, sums, strict=True))
    tokens = totals["tokens"]
    if tokens == 0:
        return {}
    kept = tokens - totals["masked"]
    return {
        "mismatch_log_ratio_mean": totals["log_ratio"] / tokens,
        "mismatch_log_ratio_abs_max": largest,
        "mismatch_kl_k3": totals["kl_k3"] / tokens,
        "mismatch_is_weight_mean": totals["is_weight"] / kept if kept else 0.0,
        "mismatch_truncated_fraction": totals["truncated"] / tokens,
        "mismatch_masked_fraction": totals["masked"] / tokens,
    }
