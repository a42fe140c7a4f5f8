"""GRPO maths (cobalt.trainer.grpo) against formulas written out here in plain torch."""

from __future__ import annotations

import math

import pytest
import torch

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.grpo import (
    GrpoLossConfig,
    group_advantages,
    grpo_loss,
    kl_to_reference,
)
from cobalt.trainer.settings import TrainerSettings

PAPER = GrpoLossConfig()  # clip 0.2 / 0.4, dual clip 3, KL 1e-4, no entropy


def mask_for(lengths: list[int], width: int) -> torch.Tensor:
    return (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).float()


def expected_advantages(
    rewards: list[float], groups: list[str], mask: torch.Tensor
) -> torch.Tensor:
    """(r - group mean) / (sample std with n - 1 + 1e-6), in float64, on valid tokens."""
    out = torch.zeros(mask.shape, dtype=torch.float64)
    for group in set(groups):
        rows = [i for i, g in enumerate(groups) if g == group]
        values = [rewards[i] for i in rows]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        for i in rows:
            out[i] = (rewards[i] - mean) / (std + 1e-6)
    return out * mask.double()


def expected_policy_loss(
    log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    low: float = 0.2,
    high: float = 0.4,
    dual: float = 3.0,
) -> tuple[torch.Tensor, float, float]:
    """PPO clip with clip-higher and dual-clip, token-mean; plus both clip fractions."""
    ratio = torch.exp(log_probs - old_log_probs)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - low, 1 + high)
    per_token = torch.maximum(unclipped, clipped)
    capped = torch.minimum(per_token, -advantages * dual)
    dual_clipped = (advantages < 0) & (per_token > -advantages * dual)
    per_token = torch.where(advantages < 0, capped, per_token)
    valid = mask.bool()
    loss = (per_token * mask).sum() / mask.sum()
    clipfrac = ((clipped > unclipped) & valid).sum().item() / valid.sum().item()
    lowerfrac = (dual_clipped & valid).sum().item() / valid.sum().item()
    return loss, clipfrac, lowerfrac


# --- advantages ---------------------------------------------------------------------------


def test_advantages_match_group_normalisation_with_sample_std() -> None:
    # Three groups of different sizes, interleaved, responses of different lengths.
    groups = ["a", "b", "a", "c", "b", "a", "c", "b", "a", "c"]
    rewards = [1.0, 0.25, 0.0, 0.9, 0.75, 0.5, 0.1, 0.0, 1.0, 0.4]
    lengths = [5, 1, 3, 7, 2, 7, 4, 6, 1, 3]
    mask = mask_for(lengths, 7)

    got = group_advantages(torch.tensor(rewards), groups, mask)

    want = expected_advantages(rewards, groups, mask)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)
    assert (got[mask == 0] == 0).all()
    # Same advantage on every valid token of a response.
    assert got[3, :7].unique().numel() == 1
    # Bessel's correction: with n in the denominator group "a" would differ.
    population = torch.tensor([1.0, 0.0, 0.5, 1.0]).std(unbiased=False)
    assert not math.isclose(got[0, 0].item(), (1.0 - 0.625) / population.item(), rel_tol=1e-3)


def test_advantages_known_values() -> None:
    # 2 groups x 4 samples, scores [1,0,1,0 | 1,1,1,0] (the numbers in reference/env.md).
    groups = [0, 0, 0, 0, 1, 1, 1, 1]
    got = group_advantages(torch.tensor([1.0, 0, 1, 0, 1, 1, 1, 0]), groups, torch.ones(8, 2))
    want = torch.tensor([0.866, -0.866, 0.866, -0.866, 0.5, 0.5, 0.5, -1.5])
    torch.testing.assert_close(got[:, 0], want, atol=1e-3, rtol=0)


@pytest.mark.parametrize("value", [0.0, 1.0, 0.7, 0.1, 1 / 3])
def test_group_with_equal_rewards_has_zero_advantage(value: float) -> None:
    # 16 equal rewards: float32 rounding makes verl's own result 0.056 for 0.7, not 0.
    rewards = [value] * 16 + [0.0, 1.0, 1.0, 0.0]
    groups = ["same"] * 16 + ["mixed"] * 4
    mask = torch.ones(20, 3)

    got = group_advantages(torch.tensor(rewards), groups, mask)

    assert (got[:16] == 0).all()
    torch.testing.assert_close(got[16:, 0], torch.tensor([-0.866, 0.866, 0.866, -0.866]),
                               atol=1e-3, rtol=0)  # fmt: skip


def test_single_response_group_is_refused() -> None:
    with pytest.raises(ValueError, match="single response"):
        group_advantages(torch.tensor([1.0, 0.0, 1.0]), ["a", "a", "b"], torch.ones(3, 2))


def test_advantages_reject_mismatched_inputs() -> None:
    with pytest.raises(ValueError):
        group_advantages(torch.tensor([1.0, 0.0]), ["a", "a", "a"], torch.ones(2, 2))
    with pytest.raises(ValueError):
        group_advantages(torch.tensor([[1.0], [0.0]]), ["a", "a"], torch.ones(2, 2))


# --- policy loss --------------------------------------------------------------------------


def clipping_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Tokens in every clipping regime, with padding that holds extreme values."""
    # Ratios per token; 0 marks padding (filled with an extreme ratio below).
    ratios = [
        [1.0, 1.2, 1.5, 0.5, 1.39],  # A > 0: inside, inside, above 1.4 (clipped), low, edge
        [0.9, 0.7, 1.3, 5.0, 0.0],  # A < 0: inside, below 0.8 (clipped), inside, dual clip
        [2.0, 0.79, 4.0, 0.0, 0.0],  # A < 0: unclipped (2 < c), below 0.8 (clipped), dual clip
        [1.45, 0.6, 1.1, 1.0, 0.0],  # A > 0, small
    ]
    advantages_per_row = [1.5, -0.8, -2.0, 0.3]
    lengths = [5, 4, 3, 4]
    mask = mask_for(lengths, 5)
    old = torch.log(torch.rand(4, 5, generator=torch.Generator().manual_seed(1)) * 0.9 + 0.05)
    ratio = torch.tensor(ratios)
    ratio = torch.where(mask.bool(), ratio, torch.full_like(ratio, 100.0))
    log_probs = (old + torch.log(ratio)).requires_grad_(True)
    advantages = torch.tensor(advantages_per_row)[:, None] * torch.ones(4, 5)
    advantages = torch.where(mask.bool(), advantages, torch.full_like(advantages, -50.0))
    return log_probs, old, advantages, mask


def test_policy_loss_matches_clip_higher_dual_clip_token_mean() -> None:
    log_probs, old, advantages, mask = clipping_batch()
    want, want_clipfrac, want_lowerfrac = expected_policy_loss(log_probs, old, advantages, mask)
    assert want_clipfrac > 0 and want_lowerfrac > 0  # every regime is exercised

    loss, metrics = grpo_loss(log_probs, old, advantages, mask, GrpoLossConfig(kl_coef=0.0))

    torch.testing.assert_close(loss, want, atol=1e-6, rtol=1e-6)
    assert metrics["pg_clipfrac"] == pytest.approx(want_clipfrac)
    assert metrics["pg_clipfrac_lower"] == pytest.approx(want_lowerfrac)
    assert metrics["ppo_kl"] == pytest.approx(
        ((old - log_probs) * mask).sum().item() / mask.sum().item(), abs=1e-6
    )
    assert metrics["loss"] == pytest.approx(metrics["pg_loss"])
    # Gradients agree too: clipped tokens get none, dual-clipped ones none either.
    (got_grad,) = torch.autograd.grad(loss, log_probs)
    (want_grad,) = torch.autograd.grad(want, log_probs)
    torch.testing.assert_close(got_grad, want_grad, atol=1e-7, rtol=1e-6)
    assert got_grad[0, 2] == 0  # A > 0, ratio 1.5 above 1 + 0.4
    assert got_grad[0, 1] != 0  # A > 0, ratio 1.2 inside 1 + 0.4 (would clip at 0.2)
    assert got_grad[1, 3] == 0  # A < 0, ratio 5 above c = 3
    assert (got_grad[mask == 0] == 0).all()


def test_policy_loss_random_batch() -> None:
    gen = torch.Generator().manual_seed(7)
    mask = mask_for([9, 3, 12, 1, 6, 12], 12)
    old = -torch.rand(6, 12, generator=gen) * 4
    log_probs = old + torch.randn(6, 12, generator=gen) * 0.6
    advantages = torch.randn(6, 1, generator=gen) * mask

    loss, _ = grpo_loss(log_probs, old, advantages, mask, GrpoLossConfig(kl_coef=0.0))

    want, _, _ = expected_policy_loss(log_probs, old, advantages, mask)
    torch.testing.assert_close(loss, want, atol=1e-6, rtol=1e-6)


def test_unchanged_policy_loss_is_minus_mean_advantage() -> None:
    # Ratio 1 everywhere: the loss is the token-mean of -A (longer responses weigh more).
    mask = mask_for([4, 1], 4)
    advantages = torch.tensor([[1.0], [-1.0]]) * mask
    log_probs = torch.full((2, 4), -1.0)
    loss, metrics = grpo_loss(log_probs, log_probs, advantages, mask, GrpoLossConfig(kl_coef=0))
    assert loss.item() == pytest.approx(-(4 * 1.0 - 1.0) / 5)
    assert metrics["pg_clipfrac"] == 0 and metrics["ppo_kl"] == 0


# --- KL to the reference and entropy -------------------------------------------------------


def test_kl_k2_value() -> None:
    log_probs = torch.log(torch.tensor([[0.5, 0.5, 0.9], [0.2, 0.3, 0.3]]))
    ref = torch.log(torch.tensor([[0.25, 0.5, 0.1], [0.4, 0.3, 0.3]]))
    mask = mask_for([2, 1], 3)

    got = kl_to_reference(log_probs, ref, mask)

    # Valid tokens: 0.5 * ln(2)^2, 0, 0.5 * ln(0.5)^2; padding (0.9 vs 0.1) is ignored.
    assert got.item() == pytest.approx((0.5 * math.log(2) ** 2 * 2) / 3, rel=1e-6)


def test_loss_adds_kl_times_coefficient_and_its_gradient() -> None:
    gen = torch.Generator().manual_seed(3)
    mask = mask_for([3, 5], 5)
    old = -torch.rand(2, 5, generator=gen) - 0.1
    log_probs = (old + 0.05 * torch.randn(2, 5, generator=gen)).requires_grad_(True)
    ref = old - 0.3 * torch.rand(2, 5, generator=gen)
    advantages = torch.tensor([[0.7], [-0.7]]) * mask
    config = GrpoLossConfig(kl_coef=0.5)

    loss, metrics = grpo_loss(log_probs, old, advantages, mask, config, ref_log_probs=ref)

    kl = (0.5 * (log_probs - ref) ** 2 * mask).sum() / mask.sum()
    assert metrics["kl_ref"] == pytest.approx(kl.item(), rel=1e-6)
    pg, _, _ = expected_policy_loss(log_probs, old, advantages, mask)
    torch.testing.assert_close(loss, pg + 0.5 * kl)
    (got_grad,) = torch.autograd.grad(loss, log_probs)
    (want_grad,) = torch.autograd.grad(pg + 0.5 * kl, log_probs)
    torch.testing.assert_close(got_grad, want_grad)


def test_paper_kl_coefficient_is_used_by_default() -> None:
    mask = torch.ones(1, 2)
    log_probs = torch.tensor([[-1.0, -2.0]])
    ref = torch.tensor([[-2.0, -2.0]])
    loss, metrics = grpo_loss(log_probs, log_probs, torch.zeros(1, 2), mask, PAPER, ref)
    assert metrics["kl_ref"] == pytest.approx(0.25)
    assert loss.item() == pytest.approx(1e-4 * 0.25)


def test_entropy_is_a_metric_and_weighted_by_its_coefficient() -> None:
    mask = mask_for([2, 1], 2)
    log_probs = torch.full((2, 2), -1.0)
    entropy = torch.tensor([[1.0, 2.0], [3.0, 100.0]])
    advantages = torch.zeros(2, 2)

    loss, metrics = grpo_loss(log_probs, log_probs, advantages, mask, PAPER, log_probs, entropy)
    assert metrics["entropy"] == pytest.approx(2.0)
    assert loss.item() == 0  # coefficient 0 in the paper setting

    config = GrpoLossConfig(kl_coef=0.0, entropy_coef=0.01)
    loss, _ = grpo_loss(log_probs, log_probs, advantages, mask, config, entropy=entropy)
    assert loss.item() == pytest.approx(-0.01 * 2.0)


def test_missing_reference_or_entropy_is_an_error_when_weighted() -> None:
    ones = torch.ones(1, 2)
    with pytest.raises(ValueError, match="reference"):
        grpo_loss(ones, ones, ones, ones, GrpoLossConfig(kl_coef=1e-4))
    with pytest.raises(ValueError, match="entropy"):
        grpo_loss(ones, ones, ones, ones, GrpoLossConfig(kl_coef=0, entropy_coef=0.1))


# --- settings -----------------------------------------------------------------------------


def test_hyperparameter_defaults_are_the_paper_values() -> None:
    settings = TrainerHyperparameters()
    assert (settings.lr, settings.weight_decay, settings.grad_clip) == (1e-6, 0.01, 1.0)
    assert (settings.n_samples, settings.contexts_per_step, settings.updates_per_step) == (
        16,
        128,
        2,
    )
    assert settings.contexts_per_update == 64
    assert (settings.max_prompt_tokens, settings.max_response_tokens) == (10_240, 6_144)
    assert GrpoLossConfig.from_settings(settings) == PAPER
    assert GrpoLossConfig.from_settings(TrainerHyperparameters(clip_ratio_high=0.28)) == (
        GrpoLossConfig(clip_ratio_high=0.28)
    )


def test_process_settings_read_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COBALT_TRAINER_ORCHESTRATOR_URL", "http://orchestrator:8200")
    monkeypatch.setenv("COBALT_TRAINER_DEVICE", "cuda")
    monkeypatch.setenv("COBALT_TRAINER_KEEP_CHECKPOINTS", "5")
    settings = TrainerSettings()
    assert settings.orchestrator_url == "http://orchestrator:8200"
    assert (settings.device, settings.keep_checkpoints) == ("cuda", 5)
    monkeypatch.setenv("COBALT_TRAINER_KEEP_CHECKPOINTS", "1")  # the served one would go
    with pytest.raises(ValueError, match="keep_checkpoints"):
        TrainerSettings()


def test_settings_refuse_uneven_mini_batches() -> None:
    with pytest.raises(ValueError, match="equal mini-batches"):
        TrainerHyperparameters(contexts_per_step=5, updates_per_step=2)
