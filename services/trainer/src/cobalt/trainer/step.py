"""One GRPO training step on a Hugging Face causal LM, top to bottom.

Input: the step's sampled responses (`Rollouts`: prompt and response token ids, the
sampler's log-probabilities, one reward each, and the context each was sampled for).
`train_step` then:

1. computes group-normalised advantages over the whole step (`grpo.group_advantages`),
   one per episode (a multi-turn episode's turns share it; otherwise one per response);
   a job with `reward_shuffle_seed` (the shuffled-reward control) permutes the episodes'
   rewards within each group first;
2. splits the groups into `updates_per_step` mini-batches (under torchrun each rank takes
   every world-th row of each), leaves out the responses whose loss has no gradient
   (advantage 0 with neither KL nor entropy term: `rows_with_gradient`; they still count
   in the token-mean) and packs each share into micro-batches of at most
   `token_budget` tokens: with `share_prompts` (the default) the responses to one prompt
   share one forward of it, segments packed into one row without padding
   (prompt_sharing.py); without, one right-padded row per response, packed by length
   (`micro_batches`);
3. for each mini-batch: per micro-batch, new log-probabilities of exactly the sampled
   response tokens (with gradient, chunked: logprobs.py), the frozen reference's (without),
   the loss (`grpo.grpo_loss`) scaled to its share of the mini-batch's tokens, backward
   (gradients accumulate); then global-norm gradient clipping and one AdamW update.

The ratio's denominator is the sampler's log-probabilities, or with
`recompute_old_log_probs` the policy's own before the step's first update; the latter
are then compared with the sampler's (the step's `mismatch_*` metrics) and, when the job
asks, weigh (TIS) or mask (MIS) each token's loss (offpolicy.py).

The loss of each micro-batch is its own token-mean; weighted by (its tokens / the
mini-batch's tokens) the accumulated gradient is the token-mean gradient of the whole
mini-batch, exactly the unbatched step's. Memory thus follows the budget, not the batch.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Sequence
from contextlib import nullcontext

import torch

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.reward_shuffle import shuffled_within_groups
from cobalt.trainer.batching import (
    Micro,
    PackedBatch,
    Rollouts,
    micro_batch_rows,
    micro_plans,
    mini_batches,
    packed_micro_batch,
    refuse_rows_over_budget,
)
from cobalt.trainer.distributed import (
    all_reduce_token_weighted,
    rank_and_size,
    sum_over_ranks,
)
from cobalt.trainer.grpo import GrpoLossConfig, group_advantages, grpo_loss
from cobalt.trainer.logprobs import (
    DEFAULT_CHUNK_TOKENS,
    EntropyMode,
    TokenLogProbs,
    response_token_log_probs,
)
from cobalt.trainer.offpolicy import (
    OffPolicyCorrection,
    TokenCorrection,
    mismatch_metrics,
    mismatch_sums,
)
from cobalt.trainer.precision import Precision, freeze
from cobalt.trainer.prompt_sharing import shared_prompt_attention

__all__ = [
    "Rollouts",
    "episode_advantages",
    "frozen_copy",
    "make_optimizer",
    "response_log_probs",
    "rows_with_gradient",
    "train_step",
]


def response_log_probs(
    model: torch.nn.Module,
    batch: PackedBatch,
    *,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    entropy: EntropyMode = "logged",
) -> TokenLogProbs:
    """Log-probability and entropy (B, T) of each response token given everything before
    it, without full-vocabulary logits for every position (logprobs.py)."""
    return response_token_log_probs(
        model,
        batch.input_ids,
        batch.attention_mask,
        batch.response_positions,
        batch.response_ids,
        batch.response_mask,
        chunk_tokens=chunk_tokens,
        entropy=entropy,
        predicting_positions=batch.predicting_positions,
        response_rows=batch.response_rows,
        position_ids=batch.position_ids,
        layout=batch.layout,
    )


def frozen_copy(model: torch.nn.Module) -> torch.nn.Module:
    """A frozen copy of the model's current weights (tests and benchmarks; the trainer
    loads its reference from the model directory, `precision.load_reference`)."""
    return freeze(copy.deepcopy(model))


def make_optimizer(
    model: torch.nn.Module, settings: TrainerHyperparameters
) -> torch.optim.Optimizer:
    """AdamW at a constant learning rate with decoupled weight decay, over the parameters
    that train (every weight, or a LoRA job's adapter: its moments cover nothing else).

    The fused implementation updates each parameter in one kernel: the default
    (for-each) one builds temporaries the size of all the weights (the denominator
    sqrt(v) / bias correction + eps), an extra 4 P bytes at the step's peak.
    """
    trained = [p for p in model.parameters() if p.requires_grad]  # a LoRA job: the adapter
    return torch.optim.AdamW(
        trained, lr=settings.lr, weight_decay=settings.weight_decay, fused=True
    )


def episode_advantages(
    rollouts: Rollouts, response_mask: torch.Tensor, *, reward_shuffle_seed: int | None = None
) -> torch.Tensor:
    """Per-token advantages (B, T): GRPO over the episodes, each episode's on its turns.

    With `reward_shuffle_seed` (the shuffled-reward control) the episodes' rewards are
    first permuted within each group (`cobalt.shared.reward_shuffle`)."""
    episode_ids = rollouts.episode_ids
    if episode_ids is None:
        episode_ids = range(len(rollouts.rewards))
    first_row: dict[Hashable, int] = {}  # episode -> its first response's row
    for row, episode in enumerate(episode_ids):
        first_row.setdefault(episode, row)
    position = {episode: k for k, episode in enumerate(first_row)}
    row_episode = torch.tensor([position[episode] for episode in episode_ids])
    firsts = list(first_row.values())
    groups = [rollouts.group_ids[row] for row in firsts]
    values = [float(rollouts.rewards[row]) for row in firsts]
    if reward_shuffle_seed is not None:
        values = shuffled_within_groups(values, groups, reward_shuffle_seed)
    rewards = torch.tensor(values, dtype=torch.float32)
    per_episode = group_advantages(rewards, groups, torch.ones((len(firsts), 1)))[:, 0]
    return per_episode[row_episode].unsqueeze(-1) * response_mask


def rows_with_gradient(
    minis: Sequence[Sequence[int]], advantages: torch.Tensor, settings: TrainerHyperparameters
) -> list[list[int]]:
    """Each mini-batch's rows whose loss has a gradient: without the KL and entropy terms
    and without an importance correction, a response of advantage 0 (its group's rewards
    were all equal) adds exactly 0 to the loss and to its gradient (-A * ratio is 0 on every
    branch of the clip), so it needs no forward or backward. Its tokens still count in the
    mini-batch's token-mean (`_kept_tokens` counts every row), so the update is the one the
    whole mini-batch gives. A third to a half of the experiment's groups have all-equal
    rewards (docs/experiments.md), so this is that share of a CPU step's compute.

    With `kl_coef` or `entropy_coef` above 0, or `recompute_old_log_probs` (the
    off-policy metrics and corrections cover every row), every row is computed."""
    if settings.kl_coef > 0 or settings.entropy_coef > 0 or settings.recompute_old_log_probs:
        return [list(rows) for rows in minis]
    return [[row for row in rows if float(advantages[row]) != 0.0] for rows in minis]


def _model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


def _old_log_probs(
    policy: torch.nn.Module,
    rollouts: Rollouts,
    plans: Sequence[Sequence[Micro | None]],
    *,
    pad_id: int,
    precision: Precision,
    chunk_tokens: int,
    shared: bool,
    recompute: bool = False,
) -> list[torch.Tensor]:
    """Per row, the ratio's denominator: the sampler's log-probs, or (`recompute`, or
    none given) the policy's before this step's first update (this rank's rows only;
    the others stay empty)."""
    if rollouts.old_log_probs is not None and not recompute:
        return [torch.tensor(list(row), dtype=torch.float32) for row in rollouts.old_log_probs]
    found = [torch.zeros(0) for _ in rollouts.response_ids]
    device = _model_device(policy)
    with torch.no_grad():
        for micro in (micro for plan in plans for micro in plan):
            batch = packed_micro_batch(rollouts, micro, pad_id, shared=shared).to(device)
            with precision.autocast(device):
                scored = response_log_probs(
                    policy, batch, chunk_tokens=chunk_tokens, entropy="none"
                )
            for i, row in enumerate(micro_batch_rows(micro)):
                found[row] = scored.log_probs[i, : len(rollouts.response_ids[row])].cpu()
    return found


def _off_policy(
    rollouts: Rollouts,
    old_log_probs: Sequence[torch.Tensor],
    rows: Sequence[int],
    settings: TrainerHyperparameters,
) -> tuple[dict[int, TokenCorrection], dict[str, float]]:
    """This rank's rows' TIS weights and MIS masks (none unless the job asks for them),
    and the step's `mismatch_*` metrics over every rank's rows (offpolicy.py). Both need
    the recomputed old policy and the sampler's log-probabilities."""
    correction = OffPolicyCorrection.from_settings(settings)
    if rollouts.old_log_probs is None:
        if correction.active:
            raise ValueError("tis_cap and mis_threshold need the sampler's log-probabilities")
        return {}, {}
    if not settings.recompute_old_log_probs:
        return {}, {}
    sampler = {
        row: torch.tensor(list(rollouts.old_log_probs[row]), dtype=torch.float32) for row in rows
    }
    corrections = {}
    if correction.active:
        corrections = {row: correction.tokens(old_log_probs[row], sampler[row]) for row in rows}
    sums, largest = mismatch_sums(
        [old_log_probs[row] for row in rows], [sampler[row] for row in rows], correction
    )
    sums, (largest,) = sum_over_ranks(sums, [largest])
    return corrections, mismatch_metrics(sums, largest)


def _kept_tokens(
    rollouts: Rollouts,
    plans: Sequence[Sequence[Micro | None]],
    corrections: dict[int, TokenCorrection],
    minis: Sequence[Sequence[int]],
    *,
    every: bool = True,
) -> list[float]:
    """Each mini-batch's response tokens over every rank: those the loss keeps (MIS
    leaves some out: they count in no token-mean), all of them without MIS; of every
    row of `minis`, or (`every=False`) of the rows the plans compute."""
    if not corrections and every:
        return [float(sum(len(rollouts.response_ids[row]) for row in rows)) for rows in minis]

    def kept(row: int) -> float:
        if corrections:
            return float(corrections[row].kept.sum())
        return float(len(rollouts.response_ids[row]))

    local = [sum(kept(row) for micro in plan for row in micro_batch_rows(micro)) for plan in plans]
    return sum_over_ranks(local)[0]


def _padded(rows: Sequence[torch.Tensor], width: int) -> torch.Tensor:
    out = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def train_step(
    policy: torch.nn.Module,
    reference: torch.nn.Module | None,
    optimizer: torch.optim.Optimizer,
    rollouts: Rollouts,
    settings: TrainerHyperparameters,
    pad_id: int = 0,
    precision: Precision | None = None,
    *,
    skip_zero_advantage: bool = True,
) -> list[dict[str, float]]:
    """One GRPO step: `settings.updates_per_step` AdamW updates, each accumulating the
    gradient of its mini-batch over micro-batches of at most `settings.token_budget`
    tokens; metrics of each update (with the step's advantage statistics).

    Responses whose loss has no gradient are not computed (`rows_with_gradient`; the
    update is the same); `skip_zero_advantage=False` computes them anyway, which only a
    check of that equality needs. The loss metrics (`loss`, `pg_clipfrac`, `entropy`, ...)
    are token-means over the responses computed; `skipped_responses` counts the others."""
    config = GrpoLossConfig.from_settings(settings)
    if reference is None and config.kl_coef > 0:
        raise ValueError("kl_coef > 0 needs a reference model (frozen, the starting weights)")
    precision = precision or Precision()
    lengths = [
        len(p) + len(r) for p, r in zip(rollouts.prompt_ids, rollouts.response_ids, strict=True)
    ]
    refuse_rows_over_budget(lengths, settings.token_budget)
    advantages = episode_advantages(
        rollouts, torch.ones((len(lengths), 1)), reward_shuffle_seed=settings.reward_shuffle_seed
    )[:, 0]  # (B,)
    advantage_stats = {
        "advantage_mean": float(advantages.mean()),
        "advantage_abs_mean": float(advantages.abs().mean()),
        "advantage_zero_fraction": float((advantages == 0).float().mean()),
    }

    # With several ranks each takes every world-th row of a mini-batch (distributed.py),
    # and packs its share into micro-batches.
    rank, world = rank_and_size()
    minis = mini_batches(rollouts.group_ids, settings.updates_per_step)
    if any(len(rows) < world for rows in minis):
        raise ValueError(f"a mini-batch has fewer rows than the {world} ranks sharing it")
    computed = rows_with_gradient(minis, advantages, settings) if skip_zero_advantage else minis
    advantage_stats["skipped_responses"] = float(
        sum(len(rows) for rows in minis) - sum(len(rows) for rows in computed)
    )
    shared = settings.share_prompts
    plans = micro_plans(
        rollouts,
        [rows[rank::world] for rows in computed],
        settings.token_budget,
        share_prompts=shared,
    )
    # Every forward below, and the recomputation of checkpointed layers in backward,
    # attends within the packed segments (prompt_sharing.py).
    attention = shared_prompt_attention(policy, reference) if shared else nullcontext()
    with attention:
        return _updates(
            policy,
            reference,
            optimizer,
            rollouts,
            settings,
            minis,
            [len(rows) for rows in computed],
            plans,
            advantages,
            advantage_stats,
            pad_id=pad_id,
            precision=precision,
            config=config,
            world=world,
        )


def _updates(
    policy: torch.nn.Module,
    reference: torch.nn.Module | None,
    optimizer: torch.optim.Optimizer,
    rollouts: Rollouts,
    settings: TrainerHyperparameters,
    minis: Sequence[Sequence[int]],
    computed_rows: Sequence[int],
    plans: Sequence[Sequence[Micro | None]],
    advantages: torch.Tensor,
    advantage_stats: dict[str, float],
    *,
    pad_id: int,
    precision: Precision,
    config: GrpoLossConfig,
    world: int,
) -> list[dict[str, float]]:
    """The step's updates over its planned micro-batches (`train_step`, steps 3-4)."""
    device = _model_device(policy)
    chunk, shared = settings.log_prob_chunk_tokens, settings.share_prompts
    old_log_probs = _old_log_probs(
        policy,
        rollouts,
        plans,
        pad_id=pad_id,
        precision=precision,
        chunk_tokens=chunk,
        shared=shared,
        recompute=settings.recompute_old_log_probs,
    )
    mine = [row for plan in plans for micro in plan for row in micro_batch_rows(micro)]
    corrections, mismatch = _off_policy(rollouts, old_log_probs, mine, settings)
    entropy: EntropyMode = "trained" if config.entropy_coef > 0 else "logged"

    metrics = []
    policy.train()
    kept_tokens = _kept_tokens(rollouts, plans, corrections, minis)
    # The tokens computed (`rows_with_gradient` may skip some), over which the loss
    # metrics are means; the loss itself divides by every kept token.
    computed_tokens = _kept_tokens(rollouts, plans, corrections, minis, every=False)
    for rows, computed_count, plan, global_tokens, metric_tokens in zip(
        minis, computed_rows, plans, kept_tokens, computed_tokens, strict=True
    ):
        # Token-mean over the whole mini-batch: each micro-batch's token-mean weighs its
        # share of the mini-batch's tokens, times the ranks FSDP averages gradients over.
        optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {}
        local_tokens = 0.0
        for micro in plan:
            batch = packed_micro_batch(rollouts, micro, pad_id, shared=shared).to(device)
            members = micro_batch_rows(micro)
            with precision.autocast(device):
                scored = response_log_probs(policy, batch, chunk_tokens=chunk, entropy=entropy)
                ref_log_probs = None
                if reference is not None:
                    with torch.no_grad():
                        ref_log_probs = response_log_probs(
                            reference, batch, chunk_tokens=chunk, entropy="none"
                        ).log_probs
            width = batch.response_ids.shape[1]
            old = _padded([old_log_probs[row] for row in members], width) if members else None
            row_advantages = advantages[members] if members else torch.zeros(1)
            mask, is_weights = _corrected_mask(batch.response_mask, members, corrections, width)
            tokens = float(mask.sum()) if members else 0.0
            if members and not tokens:  # MIS left every token out: weight 0, a finite loss
                mask = batch.response_mask
            loss, micro_metrics = grpo_loss(
                log_probs=scored.log_probs,
                old_log_probs=(old if old is not None else torch.zeros((1, width))).to(device),
                advantages=row_advantages.unsqueeze(-1).to(device) * batch.response_mask,
                response_mask=mask,
                config=config,
                ref_log_probs=ref_log_probs,
                entropy=scored.entropy,
                is_weights=is_weights,
            )
            # A mini-batch whose every token MIS left out trains nothing (weight 0).
            scale = tokens * world / global_tokens if global_tokens else 0.0
            (loss * scale).backward()
            for name, value in micro_metrics.items():
                sums[name] = sums.get(name, 0.0) + value * tokens
            local_tokens += tokens
        grad_norm = torch.nn.utils.clip_grad_norm_(policy.parameters(), settings.grad_clip)
        if global_tokens:  # the same on every rank
            optimizer.step()
        local = {
            name: total / local_tokens if local_tokens else 0.0 for name, total in sums.items()
        }
        # An update whose every response was skipped computed no loss: no loss metrics.
        update_metrics = (
            all_reduce_token_weighted(local, local_tokens, metric_tokens or 1.0)
            if computed_count
            else {}
        )
        # Under FSDP the norm is a DTensor; its full value is the same on every rank.
        norm = grad_norm.full_tensor() if hasattr(grad_norm, "full_tensor") else grad_norm
        update_metrics["grad_norm"] = float(norm)
        update_metrics["responses"] = float(len(rows))
        update_metrics["micro_batches"] = float(len(plan))
        metrics.append(update_metrics | advantage_stats | mismatch)
    return metrics


def _corrected_mask(
    response_mask: torch.Tensor,
    members: Sequence[int],
    corrections: dict[int, TokenCorrection],
    width: int,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The micro-batch's loss mask without the tokens MIS leaves out, and its TIS weights
    (None without TIS); the response mask as it is when the job corrects nothing."""
    if not corrections or not members:
        return response_mask, None
    device = response_mask.device
    kept = _padded([corrections[row].kept for row in members], width).to(device)
    weights = [corrections[row].weights for row in members]
    is_weights = None
    if all(w is not None for w in weights):
        is_weights = _padded([w for w in weights if w is not None], width).to(device)
    return response_mask * kept, is_weights
