"""Responses to one prompt scored in one forward of it (cobalt.trainer.prompt_sharing):
the same log-probabilities, loss, gradient and weights as one row per response."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import PretrainedConfig

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.batching import micro_batch_tokens, pack_shared, plan_micro_batches
from cobalt.trainer.equivalence import (
    shared_row_check,
    shared_step_check,
    tiny_config,
    two_contexts,
)
from cobalt.trainer.precision import read_model
from cobalt.trainer.prompt_sharing import plan_segments, shared_prompt_attention
from cobalt.trainer.step import Rollouts, make_optimizer, response_log_probs, train_step

PAD = 0
CPU = torch.device("cpu")


def grouped_model(**overrides: object) -> torch.nn.Module:
    """A random 2-layer Qwen2 with grouped-query attention (4 heads over 2 key/value heads),
    so the shared path goes through the model's GQA handling too."""
    return read_model(grouped_config(**overrides), torch.float32)


def grouped_config(**overrides: object) -> PretrainedConfig:
    return tiny_config(heads=4, kv_heads=2, **overrides)


def test_a_shared_row_scores_each_response_as_its_own_forward_does() -> None:
    comparison = shared_row_check(grouped_config(), device=CPU)

    assert comparison.facts["packed_tokens"] == 5 + 16 + 10 + 3 + 3 + 15  # each prompt once
    assert comparison.facts["rows_alone"] == 9
    assert comparison.differences.keys() == {"log_probs", "entropy"}
    for name, gap in comparison.differences.items():
        assert gap.max_abs <= 1e-5, (name, gap)


def test_a_response_sees_its_prompt_and_itself_only() -> None:
    """Changing another segment, or another response to the same prompt, changes nothing
    in a response's log-probabilities; changing its own prompt does."""
    model = grouped_model()
    base = two_contexts()

    def scored(rollouts: Rollouts) -> torch.Tensor:
        batch = pack_shared(rollouts, PAD, [[0, 1, 2, 3], [4, 5]])
        with torch.no_grad(), shared_prompt_attention(model):
            return response_log_probs(model, batch).log_probs

    def changed(
        rows: dict[int, list[int]], prompt_of: dict[int, list[int]] | None = None
    ) -> Rollouts:
        responses = [rows.get(i, list(r)) for i, r in enumerate(base.response_ids)]
        prompts = [list(p) for p in base.prompt_ids]
        for i, prompt in (prompt_of or {}).items():
            prompts[i] = prompt
        return Rollouts(prompt_ids=prompts, response_ids=responses, rewards=base.rewards,
                        group_ids=base.group_ids)  # fmt: skip

    before = scored(base)
    other_response = scored(changed({0: [47, 46, 45, 44, 43]}))  # response 0 of segment 0
    assert torch.equal(other_response[1:], before[1:])
    assert not torch.allclose(other_response[0], before[0])
    other_segment = scored(changed({}, {4: [1, 1, 1], 5: [1, 1, 1]}))
    assert torch.equal(other_segment[:4], before[:4])
    assert not torch.allclose(other_segment[4:], before[4:])


@pytest.mark.parametrize("checkpointing", [False, True])
@pytest.mark.parametrize(("budget", "updates"), [(200, 1), (19, 1), (17, 2)])
def test_shared_prompts_give_the_unshared_gradient_weights_and_metrics(
    checkpointing: bool, budget: int, updates: int
) -> None:
    comparison = shared_step_check(grouped_config(), budget=budget, updates=updates,
                                   checkpointing=checkpointing, device=CPU)  # fmt: skip

    assert {"gradients", "weights", "loss", "kl_ref", "grad_norm"} <= comparison.differences.keys()
    for name, gap in comparison.differences.items():
        assert gap.max_abs <= 1e-5, (name, gap)
    assert comparison.facts["pg_clipfrac_gap"] <= 1e-5
    assert comparison.facts["gradient_tensors"] > 0
    assert comparison.facts["attention_restored"] == 1  # restored after the step
    assert comparison.facts["shared_micro_batches"] <= comparison.facts["plain_micro_batches"]


def test_sharing_scores_fewer_tokens_within_the_budget() -> None:
    rollouts = two_contexts()
    rows = range(len(rollouts.rewards))
    plain = plan_micro_batches(rollouts, rows, 19, share_prompts=False)
    shared = plan_micro_batches(rollouts, rows, 19, share_prompts=True)
    plain_tokens = [micro_batch_tokens(rollouts, m, share_prompts=False) for m in plain]
    shared_tokens = [micro_batch_tokens(rollouts, m, share_prompts=True) for m in shared]
    assert max(plain_tokens) <= 19 and max(shared_tokens) <= 19
    assert sum(shared_tokens) < sum(plain_tokens)
    # Each micro-batch is exactly the tokens of its packed row: no padding.
    for micro, tokens in zip(shared, shared_tokens, strict=True):
        assert pack_shared(rollouts, PAD, micro).input_ids.shape == (1, tokens)


@settings(max_examples=200, deadline=None)
@given(
    groups=st.lists(
        st.tuples(st.integers(1, 20), st.lists(st.integers(1, 20), min_size=1, max_size=6)),
        min_size=1, max_size=8,
    ),
    slack=st.integers(min_value=0, max_value=60),
)  # fmt: skip
def test_segments_hold_every_row_once_under_one_prompt_within_the_budget(
    groups: list[tuple[int, list[int]]], slack: int
) -> None:
    prompts: list[list[int]] = []
    lengths: list[int] = []
    for g, (prompt_tokens, responses) in enumerate(groups):
        for length in responses:
            prompts.append([g] * prompt_tokens)
            lengths.append(length)
    budget = max(len(p) + r for p, r in zip(prompts, lengths, strict=True)) + slack
    rows = list(range(len(lengths)))[::-1]
    planned = plan_segments(prompts, lengths, rows, budget)
    placed = [row for micro in planned for segment in micro for row in segment]
    assert sorted(placed) == sorted(rows)
    for micro in planned:
        used = sum(len(prompts[s[0]]) + sum(lengths[r] for r in s) for s in micro)
        assert used <= budget
        for segment in micro:
            assert all(prompts[r] == prompts[segment[0]] for r in segment)
    # A group that fits the budget whole is one segment: its prompt is scored once.
    for g, (prompt_tokens, responses) in enumerate(groups):
        if prompt_tokens + sum(responses) <= budget:
            prompt = [g] * prompt_tokens
            assert sum(prompts[s[0]] == prompt for micro in planned for s in micro) == 1
    assert plan_segments(prompts, lengths, rows, budget) == planned  # deterministic


def test_the_shared_attention_refuses_a_forward_without_its_layout() -> None:
    model = grouped_model()
    tokens = torch.tensor([[5, 9, 3, 17]])
    with shared_prompt_attention(model), pytest.raises(ValueError, match="prompt_sharing="):
        model(input_ids=tokens)
    model(input_ids=tokens)  # restored: a plain forward works again


def test_sliding_window_models_are_refused_with_the_setting_named() -> None:
    model = grouped_model(use_sliding_window=True, sliding_window=4, max_window_layers=0)
    rollouts = two_contexts()
    hyper = TrainerHyperparameters(
        n_samples=4, contexts_per_step=2, updates_per_step=1, kl_coef=0.0, max_prompt_tokens=10,
        max_response_tokens=7,
    )  # fmt: skip
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(ValueError, match="share_prompts false"):
        train_step(model, None, make_optimizer(model, hyper), rollouts, hyper, pad_id=PAD)
    assert all(torch.equal(t, before[n]) for n, t in model.state_dict().items())
