"""Chunked response log-probabilities (cobalt.trainer.logprobs) against the direct
computation: full-vocabulary logits, log_softmax, entropy, and their gradients."""

from __future__ import annotations

import pytest
import torch
from transformers import Qwen2ForCausalLM

from cobalt.trainer.equivalence import chunked_check, direct_log_probs, uneven_batch
from cobalt.trainer.step import response_log_probs


@pytest.mark.parametrize("chunk_tokens", [1, 2, 5, 1_000])
def test_chunked_values_and_gradients_equal_the_direct_ones(
    tiny_model: Qwen2ForCausalLM, chunk_tokens: int
) -> None:
    comparison = chunked_check(tiny_model, chunk_tokens=chunk_tokens, device=torch.device("cpu"))

    assert comparison.differences.keys() == {"log_probs", "entropy", "gradients"}
    for name, gap in comparison.differences.items():
        assert gap.max_abs <= 1e-5, (name, gap)
    assert comparison.facts["padding_nonzero"] == 0  # padding holds 0
    assert comparison.facts["parameters_without_gradient"] == 0


def test_logged_entropy_keeps_no_graph_and_none_skips_it(tiny_model: Qwen2ForCausalLM) -> None:
    batch = uneven_batch()
    logged = response_log_probs(tiny_model, batch, chunk_tokens=3, entropy="logged")
    assert logged.log_probs.requires_grad
    assert logged.entropy is not None and not logged.entropy.requires_grad
    assert torch.allclose(logged.entropy, direct_log_probs(tiny_model, batch)[1], atol=1e-5)
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
