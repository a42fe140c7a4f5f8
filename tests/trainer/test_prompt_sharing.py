"""Responses to one prompt scored in one forward of it (cobalt.trainer.prompt_sharing):
the same log-probabilities, loss, gradient and weights as one row per response."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import Qwen2Config, Qwen2ForCausalLM

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.precision import enable_activation_checkpointing
from cobalt.trainer.prompt_sharing import ATTENTION, plan_segments, shared_prompt_attention
from cobalt.trainer.step import (
    Rollouts,
    frozen_copy,
    make_optimizer,
    micro_batch_tokens,
    pack,
    pack_shared,
    plan_micro_batches,
    response_log_probs,
    train_step,
)

PAD = 0


def grouped_model(**overrides: object) -> Qwen2ForCausalLM:
    """A random 2-layer Qwen2 with grouped-query attention (4 heads over 2 key/value heads),
    so the shared path goes through the model's GQA handling too."""
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=48, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        tie_word_embeddings=False, **overrides,
    )  # fmt: skip
    return Qwen2ForCausalLM(config).float()


def two_contexts() -> Rollouts:
    """Two groups of four, each sampled for one prompt, responses of uneven length; plus a
    later turn of group 0 (its own, longer prompt) in the same step."""
    first, second = [5, 9, 3, 17, 2], [22, 8, 31]
    later_turn = [*first, 7, 7, 21, 40, 41]
    responses = [[7, 7, 21, 4, 30], [11, 2], [40, 8, 8], [25, 13, 6, 6, 6, 19],
                 [1, 2, 3], [9, 9, 9, 9], [30], [12, 14, 16, 18, 20, 22, 24],
                 [3, 3, 1]]  # fmt: skip
    return Rollouts(
        prompt_ids=[first] * 4 + [second] * 4 + [later_turn],
        response_ids=responses,
        rewards=[0.2, 1.0, 0.5, 0.0, -0.1, -1.0, 0.2, 1.0, 1.0],
        group_ids=[0] * 4 + [1] * 4 + [0],
        old_log_probs=[[-3.9] * len(r) for r in responses],
    )


def test_a_shared_row_scores_each_response_as_its_own_forward_does() -> None:
    model = grouped_model()
    rollouts = two_contexts()
    segments = [[0, 1, 2, 3], [8], [4, 5, 6, 7]]
    shared = pack_shared(rollouts, PAD, segments)
    assert shared.input_ids.shape == (1, 5 + 16 + 10 + 3 + 3 + 15)  # each prompt once
    with torch.no_grad():
        alone = response_log_probs(model, pack(rollouts, PAD, [0, 1, 2, 3, 8, 4, 5, 6, 7]))
        with shared_prompt_attention(model):
            together = response_log_probs(model, shared)
    assert together.entropy is not None and alone.entropy is not None
    assert together.log_probs.shape == alone.log_probs.shape == (9, 7)
    torch.testing.assert_close(together.log_probs, alone.log_probs, atol=1e-5, rtol=0)
    torch.testing.assert_close(together.entropy, alone.entropy, atol=1e-5, rtol=0)


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
    common = {"lr": 1e-3, "weight_decay": 0.01, "n_samples": 4, "contexts_per_step": 2,
              "updates_per_step": updates, "kl_coef": 1e-2, "entropy_coef": 1e-2,
              "max_prompt_tokens": 10, "max_response_tokens": 7,
              "micro_batch_tokens": budget}  # fmt: skip
    results = {}
    for share in (False, True):
        model = grouped_model()
        if checkpointing:
            enable_activation_checkpointing(model)
        hyper = TrainerHyperparameters(**common, share_prompts=share)
        reference = frozen_copy(model)
        metrics = train_step(model, reference, make_optimizer(model, hyper), two_contexts(),
                             hyper, pad_id=PAD)  # fmt: skip
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results[share] = metrics, grads, model.state_dict()
        assert model.config._attn_implementation != ATTENTION  # restored after the step
    (plain, plain_grads, plain_weights), (shared, shared_grads, shared_weights) = (
        results[False], results[True])  # fmt: skip
    assert plain_grads and plain_grads.keys() == shared_grads.keys()
    for name, grad in plain_grads.items():
        torch.testing.assert_close(shared_grads[name], grad, atol=1e-5, rtol=0, msg=name)
    for name, weight in plain_weights.items():
        torch.testing.assert_close(shared_weights[name], weight, atol=1e-5, rtol=0, msg=name)
    for ours, theirs in zip(plain, shared, strict=True):
        for key in ("loss", "pg_loss", "ppo_kl", "kl_ref", "entropy", "grad_norm"):
            assert theirs[key] == pytest.approx(ours[key], abs=1e-5), key
        assert theirs["micro_batches"] <= ours["micro_batches"]


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
