"""Chunked response log-probabilities (cobalt.trainer.logprobs) against the direct
computation: full-vocabulary logits, log_softmax, entropy, and their gradients."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2ForCausalLM

from cobalt.trainer.step import PackedBatch, Rollouts, pack, response_log_probs

PAD = 0


def uneven_batch() -> PackedBatch:
    rollouts = Rollouts(
        prompt_ids=[[5, 9, 3], [12], [1, 2, 3, 4, 5, 6], [7, 7]],
        response_ids=[[7, 7, 21, 4], [11, 2, 30, 30, 30, 30, 31], [40], [3, 3, 9]],
        rewards=[0.0, 1.0, 0.5, 0.2],
        group_ids=["a"] * 4,
    )
    return pack(rollouts, PAD)


def direct(model: Qwen2ForCausalLM, batch: PackedBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """The computation chunking replaces: (B, L, V) logits, a float32 log-softmax."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    predicting = (batch.response_positions - 1).clamp(min=0)
    vocab = logits.shape[-1]
    picked = logits.gather(1, predicting.unsqueeze(-1).expand(-1, -1, vocab))
    log_softmax = torch.log_softmax(picked.float(), dim=-1)
    log_probs = log_softmax.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1)
    entropy = -(log_softmax.exp() * log_softmax).sum(dim=-1)
    return log_probs * batch.response_mask, entropy * batch.response_mask


@pytest.mark.parametrize("chunk_tokens", [1, 2, 5, 1_000])
def test_chunked_values_and_gradients_equal_the_direct_ones(
    tiny_model: Qwen2ForCausalLM, chunk_tokens: int
) -> None:
    batch = uneven_batch()
    weights = torch.linspace(-1.0, 1.0, batch.response_mask.numel()).view_as(batch.response_mask)

    want_log_probs, want_entropy = direct(tiny_model, batch)
    ((want_log_probs * weights).sum() + (want_entropy * weights.flip(0)).sum()).backward()
    want_grads = {
        name: p.grad.clone() for name, p in tiny_model.named_parameters() if p.grad is not None
    }
    tiny_model.zero_grad(set_to_none=True)

    got = response_log_probs(tiny_model, batch, chunk_tokens=chunk_tokens, entropy="trained")
    assert got.entropy is not None
    ((got.log_probs * weights).sum() + (got.entropy * weights.flip(0)).sum()).backward()

    assert torch.allclose(got.log_probs, want_log_probs, atol=1e-5)
    assert torch.allclose(got.entropy, want_entropy, atol=1e-5)
    assert got.log_probs[2, 1:].eq(0).all()  # padding holds 0
    assert want_grads.keys() == {n for n, p in tiny_model.named_parameters() if p.grad is not None}
    for name, parameter in tiny_model.named_parameters():
        assert parameter.grad is not None
        assert torch.allclose(parameter.grad, want_grads[name], atol=1e-5), name


def test_logged_entropy_keeps_no_graph_and_none_skips_it(tiny_model: Qwen2ForCausalLM) -> None:
    batch = uneven_batch()
    logged = response_log_probs(tiny_model, batch, chunk_tokens=3, entropy="logged")
    assert logged.log_probs.requires_grad
    assert logged.entropy is not None and not logged.entropy.requires_grad
    assert torch.allclose(logged.entropy, direct(tiny_model, batch)[1], atol=1e-5)
    assert response_log_probs(tiny_model, batch, entropy="none").entropy is None
    with pytest.raises(ValueError, match="entropy must be"):
        response_log_probs(tiny_model, batch, entropy="sometimes")  # type: ignore[arg-type]


def test_the_head_never_sees_more_than_one_chunk(tiny_model: Qwen2ForCausalLM) -> None:
    """Full-vocabulary logits exist for at most `chunk_tokens` positions at a time, in the
    forward and in the backward's recomputation."""
    batch = uneven_batch()
    positions: list[int] = []

    def record(_module: torch.nn.Module, args: tuple[torch.Tensor, ...], _out: object) -> None:
        positions.append(args[0].shape[:-1].numel())

    handle = tiny_model.get_output_embeddings().register_forward_hook(record)
    try:
        got = response_log_probs(tiny_model, batch, chunk_tokens=6)
        forward_calls = len(positions)
        got.log_probs.sum().backward()
    finally:
        handle.remove()
    assert int(batch.response_mask.sum()) == 15
    # The hook's chunks (15 tokens: 6, 6, 3), then the model's own head call with
    # logits_to_keep=1: one position for each of the 4 rows.
    assert positions[:forward_calls] == [6, 6, 3, 4]
    assert sorted(positions[forward_calls:]) == [3, 6, 6]  # backward recomputed the chunks
