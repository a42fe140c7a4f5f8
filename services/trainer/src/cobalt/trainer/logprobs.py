"""Log-probabilities of response tokens without full-vocabulary logits for every position.

A causal LM's head turns each position's hidden state (H) into V logits; at V = 151k and
16k positions that is 10 GB in float32 per sequence, plus the log-softmax and its gradient.
Only the response tokens are trained on, and each one needs only log p(token), i.e.
logit[token] - logsumexp(logits). So:

1. the decoder body runs once over the micro-batch; a forward hook on it takes its final
   (normed) hidden states, and the model's own head computes logits for one position per
   row only (`logits_to_keep=1`). The hook runs inside the model's forward, so under
   FSDP2 the head's weight is gathered exactly as in a plain forward;
2. the hidden states of the positions that predict response tokens are gathered into
   (N, H), N = the real response tokens of the micro-batch (no padding);
3. chunk by chunk of `chunk_tokens` rows, the head gives (chunk, V) logits, cast to
   float32, and log p = logit[token] - logsumexp. With gradient, a chunk keeps only its
   hidden states, targets and log-sum-exp (`_ChunkLogProbs`); backward runs the head
   again and turns those logits, in place, into their gradient
   g (onehot(token) - softmax), which the head's own backward takes. So one chunk's
   (chunk, V) float32 buffer exists at a time, plus one temporary in the forward: autograd
   through logsumexp and gather would hold four or five (the gather's scattered zeros,
   the shifted logits, their exp, the product, the sum of the two gradients).

The entropy -sum p log p is computed in the same chunk only when asked: with a gradient
when the loss uses it (`entropy_coef > 0`; that chunk then runs under
`torch.utils.checkpoint`, whose backward recomputes it through autograd), otherwise
without keeping any graph (logged, in the forward only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch.utils.checkpoint import checkpoint

from cobalt.trainer.prompt_sharing import PackedLayout

__all__ = ["DEFAULT_CHUNK_TOKENS", "EntropyMode", "TokenLogProbs", "response_token_log_probs"]

DEFAULT_CHUNK_TOKENS = 1024
"""Response tokens whose full-vocabulary logits exist at once (float32: 1024 x V x 4 bytes,
620 MB at Qwen3's 151,936 tokens)."""

EntropyMode = Literal["none", "logged", "trained"]
"""Entropy not computed, computed without a graph (to log it), or with one (to train it)."""


@dataclass(frozen=True)
class TokenLogProbs:
    """Per-token values (B, T) laid out like the micro-batch's `response_ids`."""

    log_probs: torch.Tensor  # (B, T) float32, carries the gradient when one was asked for
    entropy: torch.Tensor | None  # (B, T) float32; None when not asked for


def _statistics(
    logits: torch.Tensor, targets: torch.Tensor, entropy: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """log p(target), log-sum-exp and entropy (zeros unless asked) of float32 logits,
    without a graph and with one (chunk, V) temporary: the shifted exponentials, reused in
    place for the entropy's sum p * logit."""
    peak = logits.amax(dim=-1, keepdim=True)
    weights = (logits - peak).exp_()  # (chunk, V) exp(logit - max)
    total = weights.sum(dim=-1)
    normaliser = total.log() + peak.squeeze(-1)  # (chunk,)
    chosen = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - normaliser
    if not entropy:
        return chosen, normaliser, torch.zeros_like(chosen)
    # H = logsumexp - sum softmax * logits
    spread = normaliser - weights.mul_(logits).sum(dim=-1) / total
    return chosen, normaliser, spread


class _ChunkLogProbs(torch.autograd.Function):  # type: ignore[misc]
    """log p(target) of one chunk with a gradient, keeping no (chunk, V) tensor for
    backward: it saves the hidden states and the log-sum-exp, and backward recomputes the
    logits through the head (its hooks and autocast as in the forward), makes them the
    logits' gradient in place, and hands that to the head's backward. The entropy it also
    returns (when logged) carries no gradient."""

    @staticmethod
    def forward(
        ctx: Any,
        hidden: torch.Tensor,
        targets: torch.Tensor,
        head: torch.nn.Module,
        logged_entropy: bool,
        *parameters: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        device = hidden.device.type
        ctx.head = head
        ctx.autocast = (device, torch.is_autocast_enabled(device), torch.get_autocast_dtype(device))
        chosen, normaliser, spread = _statistics(
            head(hidden).float(), targets, entropy=logged_entropy
        )
        ctx.save_for_backward(hidden, targets, normaliser)
        ctx.parameters = parameters  # the very tensors the head computes with
        ctx.mark_non_differentiable(spread)
        return chosen, spread

    @staticmethod
    def backward(ctx: Any, grad_chosen: torch.Tensor, _: Any) -> tuple[Any, ...]:
        hidden, targets, normaliser = ctx.saved_tensors
        parameters = ctx.parameters
        device, autocast_on, autocast_dtype = ctx.autocast
        wanted = [hidden.detach().requires_grad_(ctx.needs_input_grad[0])]
        wanted += [
            p for p, needs in zip(parameters, ctx.needs_input_grad[4:], strict=True) if needs
        ]
        with torch.enable_grad(), torch.autocast(device, autocast_dtype, enabled=autocast_on):
            logits = ctx.head(wanted[0])
        with torch.no_grad():
            grad = logits.float()  # the same storage when the head computes in float32
            # d(logit[t] - logsumexp) / d logits = onehot(t) - softmax, times the incoming grad
            grad.sub_(normaliser.unsqueeze(-1)).exp_().mul_(-grad_chosen.unsqueeze(-1))
            grad.scatter_add_(-1, targets.unsqueeze(-1), grad_chosen.unsqueeze(-1))
            grad = grad.to(logits.dtype)
        sources = [w for w in wanted if w.requires_grad]
        found = iter(torch.autograd.grad(logits, sources, grad) if sources else ())
        del logits, grad
        hidden_grad = next(found) if wanted[0].requires_grad else None
        parameter_grads = [next(found) if needs else None for needs in ctx.needs_input_grad[4:]]
        return (hidden_grad, None, None, None, *parameter_grads)


def _trained_entropy_values(
    head: torch.nn.Module,
) -> Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """log p(target) and entropy of one chunk, both with a graph (under checkpoint)."""

    def values(hidden: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = head(hidden).float()  # (chunk, V): the only full-vocabulary tensor
        normaliser = torch.logsumexp(logits, dim=-1)  # (chunk,)
        chosen = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - normaliser
        # H = logsumexp - sum softmax * logits: no (chunk, V) log-softmax kept beside it.
        spread = normaliser - (torch.softmax(logits, dim=-1) * logits).sum(dim=-1)
        return chosen, spread

    return values


def _chunked(
    head: torch.nn.Module,
    hidden: torch.Tensor,
    targets: torch.Tensor,
    *,
    chunk_tokens: int,
    entropy: EntropyMode,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(N,) log-probs and entropies of N hidden states, `chunk_tokens` at a time."""
    trained = torch.is_grad_enabled() and hidden.requires_grad
    parameters = [p for p in head.parameters() if p.requires_grad] if trained else []
    log_probs, entropies = [hidden.new_zeros((0,), dtype=torch.float32)], []
    for start in range(0, hidden.shape[0], chunk_tokens):
        part, wanted = hidden[start : start + chunk_tokens], targets[start : start + chunk_tokens]
        if trained and entropy == "trained":  # backward recomputes the chunk by autograd
            chosen, spread = checkpoint(
                _trained_entropy_values(head), part, wanted, use_reentrant=False
            )
        elif trained:
            chosen, spread = _ChunkLogProbs.apply(
                part, wanted, head, entropy == "logged", *parameters
            )
        else:
            with torch.no_grad():
                chosen, _, spread = _statistics(
                    head(part).float(), wanted, entropy=entropy != "none"
                )
        log_probs.append(chosen)
        entropies.append(spread)
    return torch.cat(log_probs), torch.cat([log_probs[0], *entropies])


def response_token_log_probs(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    response_positions: torch.Tensor,
    response_ids: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS,
    entropy: EntropyMode = "logged",
    predicting_positions: torch.Tensor | None = None,
    response_rows: torch.Tensor | None = None,
    position_ids: torch.Tensor | None = None,
    layout: PackedLayout | None = None,
) -> TokenLogProbs:
    """log p and (optionally) the entropy of each response token given what precedes it.

    Args:
        model: a Hugging Face causal LM (`get_decoder()`, `get_output_embeddings()`,
            `logits_to_keep`), plain or FSDP2-sharded.
        input_ids, attention_mask: (S, L) the micro-batch, right-padded.
        response_positions: (B, T) the index in its row of `input_ids` of each response
            token.
        response_ids, response_mask: (B, T) the response tokens; 1 on real ones.
        chunk_tokens: response tokens per chunk of full-vocabulary logits.
        entropy: "none", "logged" (no graph) or "trained" (with a graph).
        predicting_positions: (B, T) the position whose output predicts each token.
            None: the one before it (one row per response, its prompt just before it).
        response_rows: (B,) the row of `input_ids` each response sits in. None: row i.
        position_ids, layout: a shared-prompt batch (prompt_sharing.py): segments of
            prompts and their responses in each row, positions restarting per segment.
            The model's attention must then be `prompt_sharing.ATTENTION`.

    Returns:
        (B, T) float32 log-probabilities (with a gradient when grad is enabled) and
        entropies; padding positions hold 0.
    """
    if entropy not in ("none", "logged", "trained"):
        raise ValueError(f"entropy must be none, logged or trained, not {entropy!r}")
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, not {chunk_tokens}")
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    if decoder is None or head is None:
        raise ValueError(f"{type(model).__name__} has no decoder body and output head")
    real = response_mask.bool()  # (B, T)
    if predicting_positions is None:  # the logits at position p - 1 predict the token at p
        predicting_positions = (response_positions - 1).clamp(min=0)
    predicting = predicting_positions[real]  # (N,) positions
    if response_rows is None:
        response_rows = torch.arange(real.shape[0], device=real.device)
    rows = response_rows.unsqueeze(-1).expand_as(real)[real]  # (N,) the row of each
    targets = response_ids[real]  # (N,)
    found: dict[str, Any] = {}

    def score(_module: torch.nn.Module, _args: Any, output: Any) -> None:
        hidden = output[0] if isinstance(output, tuple) else output.last_hidden_state
        found["values"] = _chunked(
            head, hidden[rows, predicting], targets, chunk_tokens=chunk_tokens, entropy=entropy
        )

    handle = decoder.register_forward_hook(score)
    try:
        if layout is None:
            model(
                input_ids=input_ids,
                attention_mask=attention_mask,
                logits_to_keep=1,
                use_cache=False,
            )
        else:  # no mask: prompt_sharing_attention attends within the layout's segments
            model(
                input_ids=input_ids,
                position_ids=position_ids,
                logits_to_keep=1,
                use_cache=False,
                prompt_sharing=layout,
            )
    finally:
        handle.remove()
    log_probs, entropies = found["values"]
    per_token = torch.zeros(real.shape, dtype=torch.float32, device=log_probs.device)
    return TokenLogProbs(
        log_probs=per_token.masked_scatter(real, log_probs),
        entropy=None if entropy == "none" else per_token.masked_scatter(real, entropies),
    )
