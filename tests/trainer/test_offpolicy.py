"""Off-policy correction (cobalt.trainer.offpolicy, the TIS/MIS path of step.train_step)
against the formulas written out here: the weights and masks on hand-built log-probs,
the loss on hand-built tensors, and a whole step's gradient on a tiny Qwen2 against the
loss computed directly from unpadded forwards."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
import torch
from transformers import Qwen2ForCausalLM

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.errors import InvalidInput
from cobalt.trainer.equivalence import tiny_config, uneven_step
from cobalt.trainer.grpo import GrpoLossConfig, grpo_loss
from cobalt.trainer.offpolicy import OffPolicyCorrection, mismatch_metrics, mismatch_sums
from cobalt.trainer.precision import read_model
from cobalt.trainer.settings import TrainerSettings, job_hyperparameters
from cobalt.trainer.step import Rollouts, frozen_copy, train_step

PAD = 0

# log pi_old - log pi_sampler per token, cycled over a response: with a TIS cap of 2
# (log 2 = 0.69) and an MIS threshold of 3 (log 3 = 1.10), 0.9 is truncated, +-1.5 and
# 2.5 are masked, the rest pass untouched.
OFFSETS = (0.0, 0.3, -0.3, 0.9, 1.5, -1.5, 0.05, 2.5, -0.6)


# --- the weights and masks ----------------------------------------------------------------


def test_tis_caps_the_ratio_and_mis_masks_outside_the_band() -> None:
    old = torch.tensor([-1.0, -2.0, -0.5, -3.0, -0.1])
    sampler = old - torch.tensor([0.0, 0.9, -0.3, 1.5, -1.5])  # ratios 1, 2.46, 0.74, 4.48, 0.22
    both = OffPolicyCorrection(tis_cap=2.0, mis_threshold=3.0).tokens(old, sampler)
    assert both.weights is not None
    expected = [1.0, 2.0, math.exp(-0.3), 2.0, math.exp(-1.5)]
    assert both.weights.tolist() == pytest.approx(expected, rel=1e-6)
    assert both.kept.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]

    only_tis = OffPolicyCorrection(tis_cap=2.0).tokens(old, sampler)
    assert only_tis.kept.tolist() == [1.0] * 5
    only_mis = OffPolicyCorrection(mis_threshold=3.0).tokens(old, sampler)
    assert only_mis.weights is None and only_mis.kept.tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]


def test_an_extreme_log_ratio_is_bounded_before_the_exponential() -> None:
    old, sampler = torch.tensor([0.0, -100.0]), torch.tensor([-100.0, 0.0])
    corrected = OffPolicyCorrection(tis_cap=1e30, mis_threshold=1e30).tokens(old, sampler)
    assert corrected.weights is not None
    assert corrected.weights.tolist() == pytest.approx([math.exp(20), math.exp(-20)], rel=1e-5)
    assert bool(torch.isfinite(corrected.weights).all())


def test_mismatch_metrics_are_the_token_mean_log_ratio_its_largest_and_k3() -> None:
    rows_old = [torch.tensor([-1.0, -2.0, -0.5]), torch.tensor([-3.0, -0.1])]
    deltas = [[0.2, -0.4, 0.9], [1.5, -0.05]]
    rows_sampler = [o - torch.tensor(d) for o, d in zip(rows_old, deltas, strict=True)]
    flat = [d for row in deltas for d in row]
    sums, largest = mismatch_sums(
        rows_old, rows_sampler, OffPolicyCorrection(tis_cap=2.0, mis_threshold=3.0)
    )
    metrics = mismatch_metrics(sums, largest)

    assert metrics["mismatch_log_ratio_mean"] == pytest.approx(sum(flat) / 5, abs=1e-6)
    assert metrics["mismatch_log_ratio_abs_max"] == pytest.approx(1.5, abs=1e-6)
    k3 = sum(math.exp(d) - 1 - d for d in flat) / 5
    assert metrics["mismatch_kl_k3"] == pytest.approx(k3, abs=1e-6)
    assert metrics["mismatch_truncated_fraction"] == pytest.approx(2 / 5)  # 0.9 and 1.5
    assert metrics["mismatch_masked_fraction"] == pytest.approx(1 / 5)  # 1.5
    kept_weights = [math.exp(0.2), math.exp(-0.4), 2.0, math.exp(-0.05)]
    assert metrics["mismatch_is_weight_mean"] == pytest.approx(sum(kept_weights) / 4, rel=1e-6)


def test_no_tokens_give_no_mismatch_metrics() -> None:
    sums, largest = mismatch_sums([torch.zeros(0)], [torch.zeros(0)], OffPolicyCorrection())
    assert mismatch_metrics(sums, largest) == {}


# --- the loss on hand-built tensors -------------------------------------------------------


def test_weighted_and_masked_loss_and_gradient_equal_the_direct_formula() -> None:
    torch.manual_seed(3)
    mask = torch.tensor([[1.0, 1, 1, 1, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 1]])
    kept = torch.tensor([[1.0, 0, 1, 1, 0], [1, 1, 0, 0, 0], [0, 1, 1, 1, 1]])
    old = -torch.rand(3, 5) * 3
    weights = torch.rand(3, 5) * 2
    advantages = torch.tensor([[1.2], [-0.7], [0.4]]) * mask
    log_probs = (old + torch.randn(3, 5) * 0.4).requires_grad_()
    config = GrpoLossConfig(kl_coef=0.0)

    loss, _ = grpo_loss(log_probs, old, advantages, mask * kept, config, is_weights=weights)
    (ours,) = torch.autograd.grad(loss, log_probs)

    direct_probs = log_probs.detach().clone().requires_grad_()
    ratio = torch.exp(direct_probs - old)
    per_token = torch.maximum(-advantages * ratio, -advantages * ratio.clamp(0.8, 1.4))
    per_token = torch.where(advantages < 0, torch.minimum(per_token, -3.0 * advantages),
                            per_token)  # fmt: skip
    used = mask * kept
    direct = (per_token * weights * used).sum() / used.sum()
    (theirs,) = torch.autograd.grad(direct, direct_probs)

    assert float(loss.detach()) == pytest.approx(float(direct.detach()), abs=1e-6)
    assert torch.allclose(ours, theirs, atol=1e-7)
    assert bool((ours[used == 0] == 0).all())  # masked tokens get no gradient


# --- a whole step on a tiny model ---------------------------------------------------------


def with_sampler_offsets(rollouts: Rollouts, model: torch.nn.Module) -> Rollouts:
    """The rollouts with sampler log-probs = the model's own minus OFFSETS, so that
    log pi_old - log pi_sampler is exactly OFFSETS on every response."""
    sampler = []
    for prompt, response in zip(rollouts.prompt_ids, rollouts.response_ids, strict=True):
        own = token_values(model, list(prompt), list(response))[0].detach()
        offsets = torch.tensor([OFFSETS[j % len(OFFSETS)] for j in range(len(response))])
        sampler.append((own - offsets).tolist())
    return Rollouts(prompt_ids=rollouts.prompt_ids, response_ids=rollouts.response_ids,
                    rewards=rollouts.rewards, group_ids=rollouts.group_ids,
                    old_log_probs=sampler)  # fmt: skip


def token_values(
    model: torch.nn.Module, prompt: list[int], response: list[int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """log p and entropy of each response token from one unpadded forward (with grad)."""
    logits = model(input_ids=torch.tensor([prompt + response])).logits[0].float()
    log_softmax = torch.log_softmax(logits, dim=-1)
    positions = torch.arange(len(prompt) - 1, len(prompt) + len(response) - 1)
    log_probs = log_softmax[positions, torch.tensor(response)]
    entropy = -(log_softmax[positions].exp() * log_softmax[positions]).sum(-1)
    return log_probs, entropy


def group_advantages_direct(rollouts: Rollouts) -> list[float]:
    out = []
    for row, group in enumerate(rollouts.group_ids):
        rewards = torch.tensor([r for r, g in zip(rollouts.rewards, rollouts.group_ids,
                                                  strict=True) if g == group])  # fmt: skip
        out.append(float((rollouts.rewards[row] - rewards.mean()) / (rewards.std() + 1e-6)))
    return out


def direct_gradient(
    model: torch.nn.Module,
    reference: torch.nn.Module,
    rollouts: Rollouts,
    settings: TrainerHyperparameters,
) -> dict[str, torch.Tensor]:
    """The step's loss (one update) from unpadded forwards, written out, and its gradient.

    Denominator: the sampler's log-probs, or with `recompute_old_log_probs` the model's
    own; weight min(exp(delta), tis_cap); tokens with exp(delta) outside
    [1/mis_threshold, mis_threshold] out of every token-mean."""
    assert rollouts.old_log_probs is not None
    advantages = group_advantages_direct(rollouts)
    terms, kept_total = [], 0.0
    for row, (prompt, response) in enumerate(
        zip(rollouts.prompt_ids, rollouts.response_ids, strict=True)
    ):
        log_probs, entropy = token_values(model, list(prompt), list(response))
        with torch.no_grad():
            ref_log_probs, _ = token_values(reference, list(prompt), list(response))
        sampler = torch.tensor(rollouts.old_log_probs[row])
        old = log_probs.detach() if settings.recompute_old_log_probs else sampler
        ratio_to_sampler = torch.exp(old - sampler)
        weight = torch.ones_like(sampler)
        if settings.tis_cap is not None:
            weight = ratio_to_sampler.clamp(max=settings.tis_cap)
        kept = torch.ones_like(sampler)
        if settings.mis_threshold is not None:
            c = settings.mis_threshold
            kept = ((ratio_to_sampler <= c) & (ratio_to_sampler >= 1 / c)).float()
        a = advantages[row]
        ratio = torch.exp(log_probs - old)
        clip = torch.maximum(
            -a * ratio, -a * ratio.clamp(1 - settings.clip_ratio_low, 1 + settings.clip_ratio_high)
        )
        policy = (
            torch.minimum(clip, torch.full_like(clip, -settings.dual_clip * a)) if a < 0 else clip
        )
        kl = 0.5 * (log_probs - ref_log_probs) ** 2
        per_token = policy * weight + settings.kl_coef * kl - settings.entropy_coef * entropy
        terms.append((per_token * kept).sum())
        kept_total += float(kept.sum())
    loss = torch.stack(terms).sum() / kept_total
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


class KeepGradients(torch.optim.SGD):
    """SGD that leaves the weights alone and keeps each update's gradient."""

    def __init__(self, params: Sequence[torch.nn.Parameter]) -> None:
        super().__init__(params, lr=0.0)
        self.seen: list[dict[int, torch.Tensor]] = []

    @torch.no_grad()
    def step(self, closure: object = None) -> None:  # type: ignore[override]
        self.seen.append({i: p.grad.clone() for i, p in enumerate(self.param_groups[0]["params"])
                          if p.grad is not None})  # fmt: skip


def step_settings(**chosen: object) -> TrainerHyperparameters:
    values: dict[str, object] = {
        "n_samples": 4, "contexts_per_step": 2, "updates_per_step": 1, "kl_coef": 1e-2,
        "entropy_coef": 1e-2, "grad_clip": 1e9, "max_prompt_tokens": 7, "max_response_tokens": 8,
    }  # fmt: skip
    return TrainerHyperparameters.model_validate(values | chosen)


CORRECTIONS = [
    pytest.param({}, id="default: the sampler's denominator"),
    pytest.param({"recompute_old_log_probs": True}, id="recomputed, uncorrected"),
    pytest.param({"recompute_old_log_probs": True, "tis_cap": 2.0}, id="TIS"),
    pytest.param({"recompute_old_log_probs": True, "mis_threshold": 3.0}, id="MIS"),
    pytest.param({"recompute_old_log_probs": True, "tis_cap": 2.0, "mis_threshold": 3.0},
                 id="TIS and MIS"),
]  # fmt: skip


@pytest.mark.parametrize("share_prompts", [False, True])
@pytest.mark.parametrize("budget", [None, 15])
@pytest.mark.parametrize("correction", CORRECTIONS)
def test_the_step_gradient_equals_the_direct_computation(
    correction: dict[str, object], budget: int | None, share_prompts: bool
) -> None:
    config = tiny_config()
    model = read_model(config, torch.float32)
    rollouts = with_sampler_offsets(uneven_step(), model)
    settings = step_settings(micro_batch_tokens=budget, share_prompts=share_prompts,
                             **correction)  # fmt: skip
    reference = frozen_copy(model)

    expected = direct_gradient(read_model(config, torch.float32), reference, rollouts, settings)
    optimizer = KeepGradients(list(model.parameters()))
    (update,) = train_step(model, reference, optimizer, rollouts, settings, pad_id=PAD)

    (seen,) = optimizer.seen
    names = [name for name, _ in model.named_parameters()]
    assert len(seen) == len(expected) == len(names)
    for i, name in enumerate(names):
        assert torch.allclose(seen[i], expected[name], atol=2e-6, rtol=1e-4), name
    if budget is not None:
        assert update["micro_batches"] > 1  # the kept-token weighting spans micro-batches


def test_the_correction_changes_the_gradient() -> None:
    """The comparison above would pass if the settings did nothing: they do not."""
    config = tiny_config()
    model = read_model(config, torch.float32)
    rollouts = with_sampler_offsets(uneven_step(), model)
    reference = frozen_copy(model)
    gradients = []
    for correction in (
        {"recompute_old_log_probs": True},
        {"recompute_old_log_probs": True, "tis_cap": 2.0, "mis_threshold": 3.0},
    ):
        stepped = read_model(config, torch.float32)
        optimizer = KeepGradients(list(stepped.parameters()))
        train_step(stepped, reference, optimizer, rollouts, step_settings(**correction),
                   pad_id=PAD)  # fmt: skip
        gradients.append(optimizer.seen[0])
    assert any(not torch.allclose(gradients[0][i], gradients[1][i]) for i in gradients[0])


def test_the_step_reports_the_mismatch_it_was_given(tiny_model: Qwen2ForCausalLM) -> None:
    rollouts = with_sampler_offsets(uneven_step(), tiny_model)
    settings = step_settings(recompute_old_log_probs=True, tis_cap=2.0, mis_threshold=3.0,
                             updates_per_step=2)  # fmt: skip
    offsets = [OFFSETS[j % len(OFFSETS)] for r in rollouts.response_ids for j in range(len(r))]
    optimizer = torch.optim.SGD(tiny_model.parameters(), lr=1e-3)
    updates = train_step(tiny_model, frozen_copy(tiny_model), optimizer, rollouts, settings,
                         pad_id=PAD)  # fmt: skip

    for update in updates:  # the step's, measured once before its first update
        assert update["mismatch_log_ratio_mean"] == pytest.approx(
            sum(offsets) / len(offsets), abs=1e-5
        )
        assert update["mismatch_log_ratio_abs_max"] == pytest.approx(
            max(abs(d) for d in offsets), abs=1e-5
        )
        k3 = sum(math.exp(d) - 1 - d for d in offsets) / len(offsets)
        assert update["mismatch_kl_k3"] == pytest.approx(k3, abs=1e-5)
        masked = sum(abs(d) > math.log(3) for d in offsets) / len(offsets)
        assert update["mismatch_masked_fraction"] == pytest.approx(masked)
        truncated = sum(d > math.log(2) for d in offsets) / len(offsets)
        assert update["mismatch_truncated_fraction"] == pytest.approx(truncated)


def test_the_default_step_measures_nothing_and_recomputes_nothing(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    rollouts = with_sampler_offsets(uneven_step(), tiny_model)
    forwards = []
    tiny_model.register_forward_hook(lambda *_: forwards.append(torch.is_grad_enabled()))
    optimizer = torch.optim.SGD(tiny_model.parameters(), lr=1e-3)
    updates = train_step(tiny_model, None, optimizer, rollouts, step_settings(kl_coef=0.0),
                         pad_id=PAD)  # fmt: skip
    assert not any(key.startswith("mismatch_") for update in updates for key in update)
    assert all(forwards)  # every forward of the policy is a training one, none recomputes


def test_a_mini_batch_with_every_token_masked_leaves_the_weights(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    base = uneven_step()
    sampler = [(token_values(tiny_model, list(p), list(r))[0].detach() - 0.5).tolist()
               for p, r in zip(base.prompt_ids, base.response_ids, strict=True)]  # fmt: skip
    rollouts = Rollouts(prompt_ids=base.prompt_ids, response_ids=base.response_ids,
                        rewards=base.rewards, group_ids=base.group_ids,
                        old_log_probs=sampler)  # fmt: skip
    # every ratio is exp(0.5) = 1.65, outside [1/1.5, 1.5]
    settings = step_settings(recompute_old_log_probs=True, mis_threshold=1.5)
    before = {n: t.clone() for n, t in tiny_model.state_dict().items()}
    optimizer = torch.optim.AdamW(tiny_model.parameters(), lr=1e-2)
    (update,) = train_step(tiny_model, frozen_copy(tiny_model), optimizer, rollouts, settings,
                           pad_id=PAD)  # fmt: skip
    assert update["mismatch_masked_fraction"] == 1.0
    assert all(torch.equal(t, before[n]) for n, t in tiny_model.state_dict().items())
    assert math.isfinite(update["loss"])


# --- the settings ---------------------------------------------------------------------------


def test_corrections_are_off_by_default() -> None:
    defaults = TrainerHyperparameters()
    assert not defaults.recompute_old_log_probs
    assert defaults.tis_cap is None and defaults.mis_threshold is None
    assert not defaults.off_policy_corrected


@pytest.mark.parametrize("name", ["tis_cap", "mis_threshold"])
def test_a_correction_without_the_recomputed_old_policy_is_refused(name: str) -> None:
    with pytest.raises(InvalidInput, match=f"{name}.*set recompute_old_log_probs to true"):
        job_hyperparameters({name: 2.0}, TrainerSettings())
    accepted = job_hyperparameters({name: 2.0, "recompute_old_log_probs": True},
                                   TrainerSettings())  # fmt: skip
    assert accepted.off_policy_corrected


@pytest.mark.parametrize(("name", "value"), [("tis_cap", 0.5), ("mis_threshold", 1.0)])
def test_caps_below_one_are_refused(name: str, value: float) -> None:
    with pytest.raises(InvalidInput, match=name):
        job_hyperparameters({name: value, "recompute_old_log_probs": True}, TrainerSettings())
