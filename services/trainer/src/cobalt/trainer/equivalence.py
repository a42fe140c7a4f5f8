"""The trainer's equivalences, computed both ways on any device and in any compute dtype.

Four of the trainer's optimisations must not change what it computes:

- micro-batches: the gradient accumulated over micro-batches of a token budget is the
  whole mini-batch's gradient in one pass (step.py);
- chunked log-probabilities: the log-probabilities, entropies and gradients of the
  chunked head are those of a log_softmax over full-vocabulary logits (logprobs.py);
- prompt sharing: responses scored in one forward of their prompt get the log-probs,
  gradient, weights and metrics of one row per response (prompt_sharing.py);
- LoRA: the starting adapter changes nothing, a step moves the adapter alone, and the
  reference is the base (lora.py).

Each `*_check` computes both sides on the same inputs and returns a `Comparison`: the
largest absolute and the relative difference of each quantity compared, and the facts
the comparison relies on (that the step did split, that the adapter moved). The trainer
tests assert them on the CPU in float32; bench/gpu_trainer.py runs the same checks on
CUDA in float32 and in bfloat16 against `TOLERANCES`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.batching import PackedBatch, pack, pack_shared
from cobalt.trainer.precision import Precision, enable_activation_checkpointing, read_model
from cobalt.trainer.prompt_sharing import ATTENTION, shared_prompt_attention
from cobalt.trainer.step import (
    Rollouts,
    frozen_copy,
    make_optimizer,
    response_log_probs,
    train_step,
)

if TYPE_CHECKING:
    from transformers import PretrainedConfig

__all__ = [
    "TOLERANCES",
    "all_checks",
    "Comparison",
    "Difference",
    "Tolerance",
    "chunked_check",
    "direct_log_probs",
    "lora_check",
    "micro_batch_check",
    "shared_row_check",
    "shared_step_check",
    "tiny_config",
    "two_contexts",
    "uneven_batch",
    "uneven_step",
]

PAD = 0
VOCAB = 48
METRICS = ("loss", "pg_loss", "ppo_kl", "kl_ref", "entropy", "grad_norm")
"""The update metrics compared as quantities. pg_clipfrac, a count of tokens, is reported
as a fact instead: in bfloat16 one token whose ratio sits at the clip bound may fall on
either side, and moves it by 1 / tokens."""


@dataclass(frozen=True)
class Difference:
    """How far one quantity computed two ways is apart."""

    max_abs: float
    relative: float
    """||ours - theirs|| / ||theirs|| over all elements (0 when both are 0)."""
    where: str = ""
    """The tensor (parameter name) holding the largest absolute difference."""


@dataclass(frozen=True)
class Tolerance:
    """A difference is within it when its largest absolute difference is at most
    `max_abs`, or its relative difference at most `relative` (a quantity near 0, such as
    the KL at the first update, is judged absolutely; a large one relatively)."""

    max_abs: float
    relative: float

    def allows(self, difference: Difference) -> bool:
        return difference.max_abs <= self.max_abs or difference.relative <= self.relative


TOLERANCES = {
    # Summation order alone: micro-batches, chunks and packed rows add the same products
    # in another order (float32 epsilon 1.2e-7, times the reductions' length).
    torch.float32: Tolerance(max_abs=1e-4, relative=1e-4),
    # bfloat16 keeps 8 significant bits (epsilon 3.9e-3): each path rounds its own
    # intermediates (other shapes, other kernels), so results agree to about 1%.
    torch.bfloat16: Tolerance(max_abs=2e-2, relative=3e-2),
}
"""What each compute dtype allows between two ways of computing one quantity."""


@dataclass
class Comparison:
    """The differences of one check, and the facts that make it a check."""

    name: str
    differences: dict[str, Difference] = field(default_factory=dict)
    facts: dict[str, float] = field(default_factory=dict)

    def outside(self, tolerance: Tolerance) -> list[str]:
        """The quantities whose difference the tolerance does not allow."""
        return [name for name, d in self.differences.items() if not tolerance.allows(d)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "differences": {
                name: {"max_abs": d.max_abs, "relative": d.relative, "where": d.where}
                for name, d in self.differences.items()
            },
            "facts": self.facts,
        }


def difference(
    ours: Mapping[str, torch.Tensor] | torch.Tensor,
    theirs: Mapping[str, torch.Tensor] | torch.Tensor,
) -> Difference:
    """The largest absolute and the relative difference over tensors of the same names."""
    if isinstance(ours, torch.Tensor) or isinstance(theirs, torch.Tensor):
        assert isinstance(ours, torch.Tensor) and isinstance(theirs, torch.Tensor)
        ours, theirs = {"": ours}, {"": theirs}
    if ours.keys() != theirs.keys():
        raise ValueError(f"different tensors: {sorted(ours.keys() ^ theirs.keys())}")
    worst, where, error, norm = 0.0, "", 0.0, 0.0
    for name, mine in ours.items():
        gap = (mine.detach().double() - theirs[name].detach().double().to(mine.device)).cpu()
        largest = float(gap.abs().max()) if gap.numel() else 0.0
        if largest > worst or not where:
            worst, where = largest, name
        error += float(gap.square().sum())
        norm += float(theirs[name].detach().double().square().sum())
    relative = 0.0 if error == 0 else (error / norm) ** 0.5 if norm else float("inf")
    return Difference(max_abs=worst, relative=relative, where=where)


def scalar_difference(ours: float, theirs: float) -> Difference:
    return difference(torch.tensor([ours]), torch.tensor([theirs]))


def tiny_config(
    architecture: str = "qwen2", *, heads: int = 1, kv_heads: int = 1, **overrides: Any
) -> PretrainedConfig:
    """A 2-layer decoder (hidden 64, a 48-token vocabulary) of a real architecture: the
    trainer tests' models (qwen2), or the GPU run's (qwen3, with grouped-query heads)."""
    from transformers import AutoConfig

    return AutoConfig.for_model(
        architecture,
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=128,
        tie_word_embeddings=False,
        **overrides,
    )


def _model(config: PretrainedConfig, device: torch.device) -> torch.nn.Module:
    """The config's seeded random weights in float32: every call the same model."""
    return read_model(config, torch.float32, device)


_UNEVEN_RESPONSES = [
    [7, 7, 21, 4, 30],
    [11, 2],
    [40, 8, 8],
    [25, 13, 6, 6, 6, 19],
    [1, 2, 3],
    [9, 9, 9, 9],
    [30],
    [12, 14, 16, 18, 20, 22, 24],
]
"""Two groups' worth of responses of uneven length."""


def uneven_step() -> Rollouts:
    """Two groups of four with prompts and responses of uneven length."""
    prompts = [[5, 9, 3, 17], [22, 8], [1, 2, 3, 4, 5, 6, 7], [30, 31]]
    responses = [list(r) for r in _UNEVEN_RESPONSES]
    return Rollouts(
        prompt_ids=[prompts[i % 4] for i in range(8)],
        response_ids=responses,
        rewards=[0.2, 1.0, 0.5, 0.0, -0.1, -1.0, 0.2, 1.0],
        group_ids=[i // 4 for i in range(8)],
        old_log_probs=[[-3.9] * len(r) for r in responses],
    )


def two_contexts() -> Rollouts:
    """Two groups of four, each sampled for one prompt, responses of uneven length; plus a
    later turn of group 0 (its own, longer prompt) in the same step."""
    first, second = [5, 9, 3, 17, 2], [22, 8, 31]
    later_turn = [*first, 7, 7, 21, 40, 41]
    responses = [*(list(r) for r in _UNEVEN_RESPONSES), [3, 3, 1]]
    return Rollouts(
        prompt_ids=[first] * 4 + [second] * 4 + [later_turn],
        response_ids=responses,
        rewards=[0.2, 1.0, 0.5, 0.0, -0.1, -1.0, 0.2, 1.0, 1.0],
        group_ids=[0] * 4 + [1] * 4 + [0],
        old_log_probs=[[-3.9] * len(r) for r in responses],
    )


def uneven_batch() -> PackedBatch:
    """Four right-padded rows of uneven prompt and response lengths."""
    rollouts = Rollouts(
        prompt_ids=[[5, 9, 3], [12], [1, 2, 3, 4, 5, 6], [7, 7]],
        response_ids=[[7, 7, 21, 4], [11, 2, 30, 30, 30, 30, 31], [40], [3, 3, 9]],
        rewards=[0.0, 1.0, 0.5, 0.2],
        group_ids=["a"] * 4,
    )
    return pack(rollouts, PAD)


def _gradients(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: t.clone() for n, t in model.state_dict().items()}


def _settings(
    updates: int, max_prompt: int, max_response: int, **chosen: Any
) -> TrainerHyperparameters:
    """The checks' step: two groups of four, lr 1e-3, the KL and entropy terms on (every
    term of the loss is compared)."""
    return TrainerHyperparameters(
        lr=1e-3,
        weight_decay=0.01,
        n_samples=4,
        contexts_per_step=2,
        updates_per_step=updates,
        kl_coef=1e-2,
        entropy_coef=1e-2,
        max_prompt_tokens=max_prompt,
        max_response_tokens=max_response,
        **chosen,
    )


def _stepped(
    model: torch.nn.Module,
    settings: TrainerHyperparameters,
    rollouts: Rollouts,
    precision: Precision,
) -> tuple[list[dict[str, float]], dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Metrics, the last update's gradient and the weights after one step."""
    optimizer = make_optimizer(model, settings)
    reference = frozen_copy(model) if settings.kl_coef > 0 else None
    metrics = train_step(
        model, reference, optimizer, rollouts, settings, pad_id=PAD, precision=precision
    )
    return metrics, _gradients(model), _weights(model)


def _compare_steps(
    comparison: Comparison,
    ours: tuple[list[dict[str, float]], dict[str, torch.Tensor], dict[str, torch.Tensor]],
    theirs: tuple[list[dict[str, float]], dict[str, torch.Tensor], dict[str, torch.Tensor]],
) -> None:
    (our_metrics, our_grads, our_weights), (their_metrics, their_grads, their_weights) = (
        ours,
        theirs,
    )
    comparison.differences["gradients"] = difference(our_grads, their_grads)
    comparison.differences["weights"] = difference(our_weights, their_weights)
    for key in METRICS:
        # Each update's metric, the worst update counting.
        gaps = [
            scalar_difference(mine[key], other[key])
            for mine, other in zip(our_metrics, their_metrics, strict=True)
        ]
        comparison.differences[key] = max(gaps, key=lambda d: d.max_abs)
    comparison.facts["pg_clipfrac_gap"] = max(
        abs(mine["pg_clipfrac"] - other["pg_clipfrac"])
        for mine, other in zip(our_metrics, their_metrics, strict=True)
    )
    comparison.facts["gradient_tensors"] = float(len(their_grads))


def micro_batch_check(
    config: PretrainedConfig,
    *,
    budget: int,
    updates: int,
    share_prompts: bool,
    device: torch.device,
    precision: Precision | None = None,
) -> Comparison:
    """One step over micro-batches of `budget` tokens against the same step in one pass
    per mini-batch (`uneven_step`, kl and entropy terms on): last gradient, weights after
    the step, each update's metrics."""
    precision = precision or Precision()
    whole = _settings(updates, 7, 6, share_prompts=share_prompts, micro_batch_tokens=1_000)
    split = _settings(updates, 7, 6, share_prompts=share_prompts, micro_batch_tokens=budget)
    start = _weights(_model(config, device))
    one_pass = _stepped(_model(config, device), whole, uneven_step(), precision)
    micro = _stepped(_model(config, device), split, uneven_step(), precision)
    comparison = Comparison(
        f"micro-batches of {budget} tokens, {updates} update(s), "
        f"prompts {'shared' if share_prompts else 'not shared'}"
    )
    _compare_steps(comparison, micro, one_pass)
    comparison.facts["whole_micro_batches"] = max(m["micro_batches"] for m in one_pass[0])
    comparison.facts["split_micro_batches"] = min(m["micro_batches"] for m in micro[0])
    comparison.facts["unmoved_weights"] = float(
        sum(
            torch.equal(weight.cpu(), start[name].cpu()) and "norm" not in name
            for name, weight in micro[2].items()
        )
    )
    return comparison


def direct_log_probs(
    model: torch.nn.Module, batch: PackedBatch
) -> tuple[torch.Tensor, torch.Tensor]:
    """The computation chunking replaces: (B, L, V) logits, a float32 log-softmax."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    predicting = (batch.response_positions - 1).clamp(min=0)
    vocab = logits.shape[-1]
    picked = logits.gather(1, predicting.unsqueeze(-1).expand(-1, -1, vocab))
    log_softmax = torch.log_softmax(picked.float(), dim=-1)
    log_probs = log_softmax.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)
    entropy = -(log_softmax.exp() * log_softmax).sum(dim=-1)
    return log_probs * batch.response_mask, entropy * batch.response_mask


def chunked_check(
    model: torch.nn.Module,
    *,
    chunk_tokens: int,
    device: torch.device,
    precision: Precision | None = None,
) -> Comparison:
    """Chunked log-probabilities and entropies (with gradient) of `uneven_batch` against
    the direct ones: values, and the gradients of a weighted sum of both."""
    precision = precision or Precision()
    batch = uneven_batch().to(device)
    weights = torch.linspace(-1.0, 1.0, batch.response_mask.numel(), device=device)
    weights = weights.view_as(batch.response_mask)

    def objective(log_probs: torch.Tensor, entropy: torch.Tensor) -> torch.Tensor:
        return (log_probs * weights).sum() + (entropy * weights.flip(0)).sum()

    model.zero_grad(set_to_none=True)
    with precision.autocast(device):
        want_log_probs, want_entropy = direct_log_probs(model, batch)
    objective(want_log_probs, want_entropy).backward()
    want_grads = _gradients(model)
    model.zero_grad(set_to_none=True)
    with precision.autocast(device):
        got = response_log_probs(model, batch, chunk_tokens=chunk_tokens, entropy="trained")
    assert got.entropy is not None
    objective(got.log_probs, got.entropy).backward()
    got_grads = _gradients(model)
    model.zero_grad(set_to_none=True)
    comparison = Comparison(f"chunks of {chunk_tokens} tokens against full logits")
    comparison.differences["log_probs"] = difference(got.log_probs, want_log_probs)
    comparison.differences["entropy"] = difference(got.entropy, want_entropy)
    comparison.differences["gradients"] = difference(got_grads, want_grads)
    padding = batch.response_mask == 0
    comparison.facts["padding_nonzero"] = float((got.log_probs[padding] != 0).sum())
    names = {name for name, _ in model.named_parameters()}
    comparison.facts["parameters_without_gradient"] = float(len(names - got_grads.keys()))
    return comparison


def shared_row_check(
    config: PretrainedConfig, *, device: torch.device, precision: Precision | None = None
) -> Comparison:
    """`two_contexts`' responses scored in one packed row of segments against one
    right-padded row each: per-token log-probabilities and entropies (no gradient)."""
    precision = precision or Precision()
    model = _model(config, device)
    rollouts = two_contexts()
    shared = pack_shared(rollouts, PAD, [[0, 1, 2, 3], [8], [4, 5, 6, 7]]).to(device)
    with torch.no_grad(), precision.autocast(device):
        alone = response_log_probs(
            model, pack(rollouts, PAD, [0, 1, 2, 3, 8, 4, 5, 6, 7]).to(device)
        )
        with shared_prompt_attention(model):
            together = response_log_probs(model, shared)
    assert together.entropy is not None and alone.entropy is not None
    comparison = Comparison("one packed row of shared prompts against a row per response")
    comparison.differences["log_probs"] = difference(together.log_probs, alone.log_probs)
    comparison.differences["entropy"] = difference(together.entropy, alone.entropy)
    comparison.facts["packed_tokens"] = float(shared.input_ids.shape[1])
    comparison.facts["rows_alone"] = float(alone.log_probs.shape[0])
    return comparison


def shared_step_check(
    config: PretrainedConfig,
    *,
    budget: int,
    updates: int,
    checkpointing: bool,
    device: torch.device,
    precision: Precision | None = None,
) -> Comparison:
    """One step over `two_contexts` with prompts shared against one row per response:
    last gradient, weights, each update's metrics; the attention restored after."""
    precision = precision or Precision()
    results = {}
    restored = True
    for share in (False, True):
        model = _model(config, device)
        if checkpointing:
            enable_activation_checkpointing(model)
        hyper = _settings(updates, 10, 7, share_prompts=share, micro_batch_tokens=budget)
        results[share] = _stepped(model, hyper, two_contexts(), precision)
        restored = restored and model.config._attn_implementation != ATTENTION
    comparison = Comparison(
        f"shared prompts against a row per response, budget {budget}, "
        f"{updates} update(s), checkpointing "
        f"{'on' if checkpointing else 'off'}"
    )
    _compare_steps(comparison, results[True], results[False])
    comparison.facts["attention_restored"] = float(restored)
    comparison.facts["plain_micro_batches"] = sum(m["micro_batches"] for m in results[False][0])
    comparison.facts["shared_micro_batches"] = sum(m["micro_batches"] for m in results[True][0])
    return comparison


def _lora_rollouts() -> Rollouts:
    responses = [[25, 40, 17, 21], [7, 7, 3], [44, 2, 9, 31, 12], [11, 6]]
    return Rollouts(
        prompt_ids=[[5, 9, 3, 17, i] for i in range(4)],
        response_ids=responses,
        rewards=[1.0, 0.0, 0.5, -0.1],
        group_ids=[0, 0, 1, 1],
    )


def lora_check(
    config: PretrainedConfig, *, device: torch.device, precision: Precision | None = None
) -> Comparison:
    """A LoRA job's step (rank 4, kl on) against its base model drawn alone: at the start
    the policy scores as the base; after the step the frozen base is unchanged and the
    reference (the adapter off) still scores as the base, while the policy moved."""
    from cobalt.trainer.precision import load_models

    precision = precision or Precision()
    settings = TrainerHyperparameters(
        lora_rank=4, lr=1e-2, kl_coef=1e-3, n_samples=2, contexts_per_step=2, updates_per_step=1
    )
    policy, reference = load_models(config, settings, precision, device)
    assert reference is not None
    base = read_model(config, precision.compute_dtype, device)
    data = _lora_rollouts()
    batch = pack(data, PAD).to(device)

    def scored(model: torch.nn.Module) -> torch.Tensor:
        with torch.no_grad(), precision.autocast(device):
            return response_log_probs(model, batch, entropy="none").log_probs

    trained = {n for n, p in policy.named_parameters() if p.requires_grad}
    frozen = {n: p.detach().clone() for n, p in policy.named_parameters() if not p.requires_grad}
    optimizer = make_optimizer(policy, settings)
    optimized = sum(len(group["params"]) for group in optimizer.param_groups)
    at_start = scored(policy)
    base_scores = scored(base)
    train_step(policy, reference, optimizer, data, settings, precision=precision)
    after = {n: p.detach() for n, p in policy.named_parameters() if not p.requires_grad}
    comparison = Comparison("a LoRA step against its base")
    comparison.differences["policy_at_start"] = difference(at_start, base_scores)
    comparison.differences["reference_after_step"] = difference(scored(reference), base_scores)
    comparison.differences["base_weights_after_step"] = difference(after, frozen)
    moved = difference(scored(policy), base_scores)
    comparison.facts["policy_moved"] = moved.max_abs
    comparison.facts["trained_tensors"] = float(len(trained))
    comparison.facts["trained_outside_adapter"] = float(
        sum("lora_A" not in n and "lora_B" not in n for n in trained)
    )
    comparison.facts["optimized_tensors"] = float(optimized)
    comparison.facts["reference_parameters_of_its_own"] = float(
        len(list(reference.named_parameters()))
    )
    return comparison


def all_checks(
    config: PretrainedConfig, device: torch.device, precision: Precision, *, quick: bool = False
) -> Iterator[Comparison]:
    """Every check at the settings the trainer tests use (bench/gpu_trainer.py); `quick`:
    one setting of each (the CPU dry-run)."""
    micro = ((13, 2, True),) if quick else ((13, 1, False), (24, 2, False), (13, 2, True))
    for budget, updates, share in micro:
        yield micro_batch_check(
            config,
            budget=budget,
            updates=updates,
            share_prompts=share,
            device=device,
            precision=precision,
        )
    for chunk_tokens in (5,) if quick else (1, 5, 1_000):
        yield chunked_check(
            _model(config, device), chunk_tokens=chunk_tokens, device=device, precision=precision
        )
    yield shared_row_check(config, device=device, precision=precision)
    for checkpointing in (True,) if quick else (False, True):
        yield shared_step_check(
            config,
            budget=17,
            updates=2,
            checkpointing=checkpointing,
            device=device,
            precision=precision,
        )
    yield lora_check(config, device=device, precision=precision)
