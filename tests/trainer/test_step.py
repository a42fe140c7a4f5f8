"""One GRPO optimizer step (cobalt.trainer.step) on a tiny random Qwen2."""

from __future__ import annotations

import copy

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import Qwen2ForCausalLM

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.errors import InvalidInput
from cobalt.shared.reward_shuffle import shuffled_within_groups
from cobalt.trainer.batching import micro_batches, pack
from cobalt.trainer.equivalence import micro_batch_check, tiny_config, uneven_step
from cobalt.trainer.precision import Precision, enable_activation_checkpointing, freeze, read_model
from cobalt.trainer.step import (
    Rollouts,
    episode_advantages,
    frozen_copy,
    make_optimizer,
    response_log_probs,
    train_step,
)

PAD = 0
CPU = torch.device("cpu")


def sequence_log_prob(model: Qwen2ForCausalLM, prompt: list[int], response: list[int]) -> float:
    """log p(response | prompt), from one unpadded forward pass."""
    with torch.no_grad():
        tokens = torch.tensor([prompt + response])
        log_softmax = torch.log_softmax(model(input_ids=tokens).logits[0], dim=-1)
    return sum(log_softmax[len(prompt) + j - 1, token].item() for j, token in enumerate(response))


def all_log_probs(model: Qwen2ForCausalLM, rollouts: Rollouts) -> list[float]:
    return [
        sequence_log_prob(model, list(p), list(r))
        for p, r in zip(rollouts.prompt_ids, rollouts.response_ids, strict=True)
    ]


def one_group() -> Rollouts:
    prompt = [5, 9, 3, 17]
    responses = [[7, 7, 21, 4, 30], [11, 2], [40, 8, 8], [25, 13, 6, 6, 6, 19]]
    return Rollouts(
        prompt_ids=[prompt] * 4,
        response_ids=responses,
        rewards=[0.2, 1.0, 0.5, 0.0],  # best: response 1, worst: response 3
        group_ids=["p0"] * 4,
    )


def test_response_log_probs_match_unpadded_forward(tiny_model: Qwen2ForCausalLM) -> None:
    rollouts = Rollouts(
        prompt_ids=[[5, 9, 3], [12], [1, 2, 3, 4, 5, 6]],
        response_ids=[[7, 7, 21, 4], [11, 2, 30, 30, 30, 30, 31], [40]],
        rewards=[0.0, 1.0, 0.5],
        group_ids=["a", "a", "a"],
    )
    batch = pack(rollouts, PAD)
    assert batch.response_mask.sum(dim=1).tolist() == [4, 7, 1]

    with torch.no_grad():
        scored = response_log_probs(tiny_model, batch)
    log_probs, entropy = scored.log_probs, scored.entropy
    assert entropy is not None

    for row, (prompt, response) in enumerate(
        zip(rollouts.prompt_ids, rollouts.response_ids, strict=True)
    ):
        tokens = torch.tensor([list(prompt) + list(response)])
        with torch.no_grad():
            logits = tiny_model(input_ids=tokens).logits[0]
        expected = torch.log_softmax(logits, dim=-1)
        for j, token in enumerate(response):
            position = len(prompt) + j - 1
            assert log_probs[row, j].item() == pytest.approx(
                expected[position, token].item(), abs=1e-5
            )
            want_entropy = -(expected[position].exp() * expected[position]).sum()
            assert entropy[row, j].item() == pytest.approx(want_entropy.item(), abs=1e-5)


def test_one_step_raises_best_and_lowers_worst(tiny_model: Qwen2ForCausalLM) -> None:
    rollouts = one_group()
    settings = TrainerHyperparameters(lr=1e-3, contexts_per_step=1, updates_per_step=1, n_samples=4)
    reference = frozen_copy(tiny_model)
    optimizer = make_optimizer(tiny_model, settings)
    before = all_log_probs(tiny_model, rollouts)

    metrics = train_step(tiny_model, reference, optimizer, rollouts, settings, pad_id=PAD)

    after = all_log_probs(tiny_model, rollouts)
    assert after[1] > before[1] + 1e-3  # highest advantage
    assert after[3] < before[3] - 1e-3  # lowest advantage
    # The reference policy did not move.
    assert all_log_probs(reference, rollouts) == pytest.approx(before, abs=1e-6)
    (update,) = metrics
    assert update["responses"] == 4
    assert update["kl_ref"] == pytest.approx(0.0, abs=1e-9)  # policy == reference at the start
    assert update["pg_clipfrac"] == 0 and update["grad_norm"] > 0


def test_sampler_log_probs_set_the_ratio(tiny_model: Qwen2ForCausalLM) -> None:
    # Old log-probs far above the policy's: every ratio < 0.8. Positive-advantage tokens
    # are then unclipped, negative-advantage ones are clipped (no gradient).
    base = one_group()
    rollouts = Rollouts(
        prompt_ids=base.prompt_ids,
        response_ids=base.response_ids,
        rewards=base.rewards,
        group_ids=base.group_ids,
        old_log_probs=[[0.0] * len(r) for r in base.response_ids],
    )
    settings = TrainerHyperparameters(lr=1e-3, contexts_per_step=1, updates_per_step=1, kl_coef=0.0)
    optimizer = make_optimizer(tiny_model, settings)

    (update,) = train_step(tiny_model, None, optimizer, rollouts, settings, pad_id=PAD)

    assert update["ppo_kl"] > 1.0  # mean(old - new) with old = 0
    negative_tokens = len(base.response_ids[0]) + len(base.response_ids[3])
    total_tokens = sum(len(r) for r in base.response_ids)
    assert update["pg_clipfrac"] == pytest.approx(negative_tokens / total_tokens)


def test_groups_split_into_updates(tiny_model: Qwen2ForCausalLM) -> None:
    first, second = one_group(), one_group()
    rollouts = Rollouts(
        prompt_ids=[*first.prompt_ids, *second.prompt_ids],
        response_ids=[*first.response_ids, *second.response_ids[:3]] + [[3, 3]],
        rewards=[*first.rewards, 1.0, 1.0, 0.0, 0.0],
        group_ids=["g0", "g1", "g0", "g1", "g0", "g1", "g0", "g1"],
    )
    settings = TrainerHyperparameters(lr=1e-4, contexts_per_step=2, updates_per_step=2)
    reference = frozen_copy(tiny_model)
    optimizer = make_optimizer(tiny_model, settings)

    metrics = train_step(tiny_model, reference, optimizer, rollouts, settings, pad_id=PAD)

    assert [m["responses"] for m in metrics] == [4, 4]
    # The second update starts from weights the first one moved: the ratio is no longer 1.
    assert metrics[0]["ppo_kl"] == pytest.approx(0.0, abs=1e-7)
    assert metrics[1]["ppo_kl"] != pytest.approx(0.0, abs=1e-9)
    assert metrics[1]["kl_ref"] > 0


def three_groups_one_settled() -> Rollouts:
    """Groups g0 and g2 have reward variance; g1's four responses all got 0.2 (advantage 0)."""
    group = one_group()
    return Rollouts(
        prompt_ids=[*group.prompt_ids, *group.prompt_ids, *group.prompt_ids],
        response_ids=[
            *group.response_ids,
            [9, 9, 2],
            [4],
            [31, 5],
            [6, 6, 6, 6],
            *group.response_ids,
        ],
        rewards=[*group.rewards, 0.2, 0.2, 0.2, 0.2, 1.0, 0.0, 0.0, 1.0],
        group_ids=["g0"] * 4 + ["g1"] * 4 + ["g2"] * 4,
    )


@pytest.mark.parametrize("updates", [1, 3])
def test_skipping_zero_advantage_responses_changes_no_weight(
    tiny_model: Qwen2ForCausalLM, updates: int
) -> None:
    """Without KL and entropy terms a response of advantage 0 has no gradient: leaving it out
    of the forward and backward gives the same update. With 3 updates g1 is a mini-batch of
    its own, every response skipped: the optimizer must still take that update (its
    momentum and weight decay move the weights), which needs a gradient of zeros on every
    parameter. SGD with momentum and weight decay, not AdamW: AdamW divides each gradient
    by its own scale, so weights whose true gradient is 0 (the key biases: softmax ignores
    a shift shared by all keys) would move by lr times the sign of rounding noise."""
    rollouts = three_groups_one_settled()
    settings = TrainerHyperparameters(
        lr=1e-2, contexts_per_step=3, updates_per_step=updates, kl_coef=0.0, n_samples=4
    )
    computed_every_row = copy.deepcopy(tiny_model)

    def sgd(model: Qwen2ForCausalLM) -> torch.optim.Optimizer:
        return torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9, weight_decay=0.1)

    skipping, everything = sgd(tiny_model), sgd(computed_every_row)
    before = copy.deepcopy(tiny_model.state_dict())
    for _ in range(2):  # the second step's update carries the first's momentum
        skipped = train_step(tiny_model, None, skipping, rollouts, settings, pad_id=PAD)
        full = train_step(
            computed_every_row, None, everything, rollouts, settings, pad_id=PAD,
            skip_zero_advantage=False,
        )  # fmt: skip

    assert skipped[0]["skipped_responses"] == 4 and full[0]["skipped_responses"] == 0
    after_full = computed_every_row.state_dict()
    for name, weight in tiny_model.state_dict().items():
        torch.testing.assert_close(weight, after_full[name], rtol=0, atol=1e-6, msg=name)
    moved = [n for n, w in tiny_model.state_dict().items() if not torch.equal(w, before[n])]
    assert len(moved) == len(before)  # every weight moved (weight decay moves the norms)
    # The settled mini-batch computed nothing: no loss metrics, the others' are its own.
    if updates == 3:
        assert "loss" not in skipped[1] and "loss" in full[1]
        assert skipped[0]["pg_clipfrac"] == pytest.approx(full[0]["pg_clipfrac"], abs=1e-6)


@settings(max_examples=25, deadline=None)
@given(
    rewards=st.lists(
        st.lists(st.sampled_from([-0.1, 0.0, 0.2, 1.0]), min_size=2, max_size=4),
        min_size=1,
        max_size=4,
    ),
    updates=st.integers(min_value=1, max_value=4),
    share_prompts=st.booleans(),
    budget=st.sampled_from([16, 64]),
)
def test_any_step_skipping_settled_responses_moves_the_weights_as_computing_them_does(
    rewards: list[list[float]], updates: int, share_prompts: bool, budget: int
) -> None:
    """The skip's equality for any mix of settled and mixed groups (and responses whose
    reward equals their group's mean), any number of updates, micro-batch budget and
    packing: the same weights, and `skipped_responses` counts every advantage of 0."""
    torch.manual_seed(0)
    model = read_model(tiny_config(), torch.float32)
    rng = torch.Generator().manual_seed(len(rewards) * 31 + updates)
    prompts = [[int(t) for t in torch.randint(1, 40, (3,), generator=rng)] for _ in rewards]
    rows = [(g, r) for g, group in enumerate(rewards) for r in group]
    rollouts = Rollouts(
        prompt_ids=[prompts[g] for g, _ in rows],
        response_ids=[
            [int(t) for t in torch.randint(1, 40, (1 + i % 5,), generator=rng)]
            for i in range(len(rows))
        ],
        rewards=[r for _, r in rows],
        group_ids=[f"g{g}" for g, _ in rows],
    )
    divisors = [d for d in range(1, len(rewards) + 1) if len(rewards) % d == 0]
    hyper = TrainerHyperparameters(
        lr=1e-2, contexts_per_step=len(rewards), updates_per_step=divisors[updates % len(divisors)],
        kl_coef=0.0, n_samples=2, share_prompts=share_prompts, micro_batch_tokens=budget,
        max_prompt_tokens=3, max_response_tokens=5,
    )  # fmt: skip
    other = copy.deepcopy(model)

    def sgd(m: torch.nn.Module) -> torch.optim.Optimizer:
        return torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9, weight_decay=0.1)

    skipping, everything = sgd(model), sgd(other)
    for _ in range(2):
        skipped = train_step(model, None, skipping, rollouts, hyper, pad_id=PAD)
        train_step(other, None, everything, rollouts, hyper, pad_id=PAD, skip_zero_advantage=False)
    zero = episode_advantages(rollouts, torch.ones((len(rows), 1)))[:, 0] == 0
    assert skipped[0]["skipped_responses"] == float(zero.sum())
    computed = other.state_dict()
    for name, weight in model.state_dict().items():
        torch.testing.assert_close(weight, computed[name], rtol=0, atol=1e-6, msg=name)


def test_responses_are_computed_when_a_kl_or_entropy_term_gives_them_a_gradient(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    rollouts = three_groups_one_settled()
    for extra in ({"kl_coef": 1e-4}, {"kl_coef": 0.0, "entropy_coef": 0.01}):
        settings = TrainerHyperparameters(
            lr=1e-3, contexts_per_step=3, updates_per_step=1, n_samples=4, **extra
        )
        reference = frozen_copy(tiny_model) if extra["kl_coef"] else None
        optimizer = make_optimizer(tiny_model, settings)
        (update,) = train_step(tiny_model, reference, optimizer, rollouts, settings, pad_id=PAD)
        assert update["skipped_responses"] == 0, extra


def test_rollouts_validate_lengths() -> None:
    with pytest.raises(ValueError, match="differ in length"):
        Rollouts(prompt_ids=[[1]], response_ids=[[2], [3]], rewards=[1.0], group_ids=["a"])
    with pytest.raises(ValueError, match="old_log_probs"):
        Rollouts(
            prompt_ids=[[1], [1]],
            response_ids=[[2, 3], [4]],
            rewards=[1.0, 0.0],
            group_ids=["a", "a"],
            old_log_probs=[[-1.0], [-1.0]],
        )


def multi_turn_group() -> Rollouts:
    """Two groups of episodes; episode e0 has 3 turns, e1 and e2 one each, e3 two."""
    return Rollouts(
        prompt_ids=[[1], [1, 2], [1, 2, 3], [1], [1], [4], [4, 5]],
        response_ids=[[2], [3, 3], [4], [5], [6, 6], [7], [8]],
        rewards=[1.0, 1.0, 1.0, 0.0, -1.0, 0.5, 0.5],
        group_ids=["g"] * 5 + ["h"] * 2,
        episode_ids=["e0", "e0", "e0", "e1", "e2", "e3", "e3"],
    )


def test_episode_advantages_normalise_over_episodes_not_turns() -> None:
    rollouts = multi_turn_group()
    batch = pack(rollouts, PAD)
    # Reference: group g holds 3 episodes (1, 0, -1): mean 0, std 1 (Bessel); e0's three
    # turns count once. Group h holds one episode: a lone episode has no baseline.
    expected = [1 / (1 + 1e-6)] * 3 + [0.0, -1 / (1 + 1e-6)]
    with pytest.raises(ValueError, match="single response"):
        episode_advantages(rollouts, batch.response_mask)  # h has only e3
    kept = Rollouts(
        prompt_ids=rollouts.prompt_ids[:5],
        response_ids=rollouts.response_ids[:5],
        rewards=rollouts.rewards[:5],
        group_ids=rollouts.group_ids[:5],
        episode_ids=rollouts.episode_ids[:5] if rollouts.episode_ids else None,
    )
    batch = pack(kept, PAD)
    advantages = episode_advantages(kept, batch.response_mask)
    assert advantages[:, 0].tolist() == pytest.approx(expected)
    # Every token of a turn carries its episode's advantage; padding carries 0.
    assert advantages[1].tolist() == pytest.approx([expected[1]] * 2)
    assert advantages[0, 1] == 0.0
    # Counting turns as samples would weigh e0 three times: a different, wrong baseline.
    per_turn = Rollouts(
        prompt_ids=kept.prompt_ids,
        response_ids=kept.response_ids,
        rewards=kept.rewards,
        group_ids=kept.group_ids,
    )
    assert episode_advantages(per_turn, batch.response_mask)[:, 0].tolist() != pytest.approx(
        expected
    )


def test_the_shuffled_reward_control_trains_on_a_permutation_within_each_group() -> None:
    """`reward_shuffle_seed`: each group's rewards permuted (a known seed changes the order),
    the multiset and so the group's mean kept; episodes keep one reward for all turns."""
    two_groups = Rollouts(
        prompt_ids=[[1]] * 8,
        response_ids=[[2]] * 8,
        rewards=[0.0, 1.0, 0.25, 0.5, -1.0, -0.5, 0.75, 1.0],
        group_ids=["a"] * 4 + ["b"] * 4,
    )
    mask = torch.ones((8, 1))
    shuffled = shuffled_within_groups(two_groups.rewards, two_groups.group_ids, seed=7)
    assert shuffled == shuffled_within_groups(two_groups.rewards, two_groups.group_ids, seed=7)
    for rows in (slice(0, 4), slice(4, 8)):
        assert sorted(shuffled[rows]) == sorted(two_groups.rewards[rows])
        assert sum(shuffled[rows]) == sum(two_groups.rewards[rows])
    assert shuffled != list(two_groups.rewards)  # seed 7 moves rewards in both groups
    assert shuffled[:4] != list(two_groups.rewards[:4])
    assert shuffled[4:] != list(two_groups.rewards[4:])
    # The advantages are those of the shuffled rewards, exactly; without a seed, unchanged.
    as_shuffled = Rollouts(
        prompt_ids=two_groups.prompt_ids,
        response_ids=two_groups.response_ids,
        rewards=shuffled,
        group_ids=two_groups.group_ids,
    )
    control = episode_advantages(two_groups, mask, reward_shuffle_seed=7)
    assert control.tolist() == episode_advantages(as_shuffled, mask).tolist()
    assert control.tolist() != episode_advantages(two_groups, mask).tolist()
    for rows in (slice(0, 4), slice(4, 8)):
        assert float(control[rows].sum()) == pytest.approx(0.0, abs=1e-6)
    # Multi-turn: an episode's turns move together, so they still share one advantage.
    rollouts = multi_turn_group()
    kept = Rollouts(
        prompt_ids=rollouts.prompt_ids[:5],
        response_ids=rollouts.response_ids[:5],
        rewards=rollouts.rewards[:5],
        group_ids=rollouts.group_ids[:5],
        episode_ids=rollouts.episode_ids[:5] if rollouts.episode_ids else None,
    )
    episodes = episode_advantages(kept, pack(kept, PAD).response_mask, reward_shuffle_seed=7)
    assert len({float(v) for v in episodes[:3, 0]}) == 1
    assert sorted(episodes[[0, 3, 4], 0].tolist()) == pytest.approx(
        sorted(episode_advantages(kept, pack(kept, PAD).response_mask)[[0, 3, 4], 0].tolist())
    )


def test_a_job_with_a_reward_shuffle_seed_steps_on_the_shuffled_advantages(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    rollouts = one_group()
    seeded = TrainerHyperparameters(
        n_samples=4, contexts_per_step=1, updates_per_step=1, kl_coef=0.0, reward_shuffle_seed=3
    )
    shuffled = shuffled_within_groups(rollouts.rewards, rollouts.group_ids, seed=3)
    assert shuffled != list(rollouts.rewards)
    as_shuffled = Rollouts(
        prompt_ids=rollouts.prompt_ids,
        response_ids=rollouts.response_ids,
        rewards=shuffled,
        group_ids=rollouts.group_ids,
    )
    plain = seeded.model_copy(update={"reward_shuffle_seed": None})
    control, reference = copy.deepcopy(tiny_model), copy.deepcopy(tiny_model)
    metrics = train_step(control, None, make_optimizer(control, seeded), rollouts, seeded)
    expected = train_step(reference, None, make_optimizer(reference, plain), as_shuffled, plain)
    assert metrics[0]["pg_loss"] == pytest.approx(expected[0]["pg_loss"])
    for trained, wanted in zip(control.parameters(), reference.parameters(), strict=True):
        assert torch.equal(trained, wanted)


def test_episode_turns_must_share_reward_and_group() -> None:
    with pytest.raises(ValueError, match="episode 'e0': its turns differ"):
        Rollouts(
            prompt_ids=[[1], [1]],
            response_ids=[[2], [3]],
            rewards=[1.0, 0.0],
            group_ids=["g", "g"],
            episode_ids=["e0", "e0"],
        )


def test_one_step_on_episodes_moves_every_turn_of_the_best_episode(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    rollouts = Rollouts(
        prompt_ids=[[5, 9, 3], [5, 9, 3, 7, 7, 2], [5, 9, 3], [5, 9, 3, 40, 2]],
        response_ids=[[7, 7], [11, 2, 30], [40], [25, 13]],
        rewards=[1.0, 1.0, -1.0, -1.0],
        group_ids=["g"] * 4,
        episode_ids=["good", "good", "bad", "bad"],
    )
    settings = TrainerHyperparameters(
        lr=1e-3, contexts_per_step=1, updates_per_step=1, n_samples=2, kl_coef=0.0
    )
    optimizer = make_optimizer(tiny_model, settings)
    before = all_log_probs(tiny_model, rollouts)

    (update,) = train_step(tiny_model, None, optimizer, rollouts, settings, pad_id=PAD)

    after = all_log_probs(tiny_model, rollouts)
    assert after[0] > before[0] and after[1] > before[1]  # both turns of the good episode
    assert after[2] < before[2] and after[3] < before[3]  # both turns of the bad one
    assert update["responses"] == 4


@pytest.mark.parametrize("share_prompts", [False, True])
@pytest.mark.parametrize("updates", [1, 2])
@pytest.mark.parametrize("budget", [13, 24])
def test_micro_batches_give_the_unbatched_gradient_and_weights(
    budget: int, updates: int, share_prompts: bool
) -> None:
    config = tiny_config()
    comparison = micro_batch_check(config, budget=budget, updates=updates,
                                   share_prompts=share_prompts, device=CPU)  # fmt: skip

    assert {"gradients", "weights", "loss", "kl_ref", "grad_norm"} <= comparison.differences.keys()
    for name, gap in comparison.differences.items():
        assert gap.max_abs <= 1e-5, (name, gap)
    assert comparison.facts["pg_clipfrac_gap"] <= 1e-5
    assert comparison.facts["whole_micro_batches"] == 1
    assert comparison.facts["split_micro_batches"] > 1  # it did split
    assert comparison.facts["unmoved_weights"] == 0  # every weight but the norms moved
    every_weight = len(list(read_model(config, torch.float32).parameters()))
    assert comparison.facts["gradient_tensors"] == every_weight


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=40),
    slack=st.integers(min_value=0, max_value=200),
)
def test_micro_batches_hold_every_row_once_within_the_budget(
    lengths: list[int], slack: int
) -> None:
    budget = max(lengths) + slack
    rows = list(range(len(lengths)))[::-1]
    packed = micro_batches(lengths, rows, budget)
    assert sorted(row for micro in packed for row in micro) == sorted(rows)
    for micro in packed:
        assert len(micro) * max(lengths[row] for row in micro) <= budget
    # Greedy by length: a micro-batch is closed only when the next row does not fit.
    for micro, following in zip(packed, packed[1:], strict=False):
        assert (len(micro) + 1) * lengths[micro[0]] > budget
        assert min(lengths[row] for row in micro) >= lengths[following[0]]
    assert micro_batches(lengths, rows, budget) == packed  # deterministic


def test_a_row_over_the_budget_is_refused_with_the_fix(tiny_model: Qwen2ForCausalLM) -> None:
    settings = TrainerHyperparameters(
        contexts_per_step=2, n_samples=4, max_prompt_tokens=4, max_response_tokens=4,
        micro_batch_tokens=8,
    )  # fmt: skip
    optimizer = make_optimizer(tiny_model, settings)
    before = {n: t.clone() for n, t in tiny_model.state_dict().items()}
    fix = "response 2 has 10 .* at least 10 .*--micro-batch-tokens"
    with pytest.raises(InvalidInput, match=fix):
        train_step(tiny_model, frozen_copy(tiny_model), optimizer, uneven_step(), settings)
    assert all(torch.equal(t, before[n]) for n, t in tiny_model.state_dict().items())


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"micro_batch_tokens": 16_383}, "at least 16384"),
        (
            {"micro_batch_tokens": 1_000, "max_prompt_tokens": 500, "max_response_tokens": 501},
            "at least 1001",
        ),
        ({"micro_batch_tokens": 0}, "greater than or equal to 1"),
        ({"compute_dtype": "float16"}, "'auto', 'float32' or 'bfloat16'"),
        ({"log_prob_chunk_tokens": -1}, "greater than or equal to 1"),
    ],
)
def test_bad_budgets_are_refused_before_any_model_loads(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        TrainerHyperparameters.model_validate(values)
    assert TrainerHyperparameters(micro_batch_tokens=16_384).token_budget == 16_384
    assert TrainerHyperparameters().token_budget == 10_240 + 6_144


def test_bfloat16_settings_run_on_the_cpu_with_float32_master_weights(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    rollouts = one_group()
    settings = TrainerHyperparameters(
        lr=1e-3, contexts_per_step=1, updates_per_step=1, n_samples=4, kl_coef=1e-3,
        compute_dtype="bfloat16", activation_checkpointing=True, micro_batch_tokens=12,
        max_prompt_tokens=4, max_response_tokens=6,
    )  # fmt: skip
    precision = Precision.resolve(settings, torch.device("cpu"))
    assert precision.compute_dtype == torch.bfloat16 and precision.activation_checkpointing
    enable_activation_checkpointing(tiny_model)
    reference = freeze(copy.deepcopy(tiny_model).to(torch.bfloat16))
    optimizer = make_optimizer(tiny_model, settings)
    before = all_log_probs(tiny_model, rollouts)

    (update,) = train_step(tiny_model, reference, optimizer, rollouts, settings, pad_id=PAD,
                           precision=precision)  # fmt: skip

    after = all_log_probs(tiny_model, rollouts)
    assert after[1] > before[1] + 1e-3 and after[3] < before[3] - 1e-3
    assert update["micro_batches"] > 1 and abs(update["kl_ref"]) < 1e-2  # bf16 vs fp32
    assert all(p.dtype == torch.float32 for p in tiny_model.parameters())
    moments = [v for state in optimizer.state.values() for v in state.values() if v.dim()]
    assert moments and all(m.dtype == torch.float32 for m in moments)
