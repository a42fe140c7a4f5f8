"""Loading the policy and the reference (cobalt.trainer.precision), and the trainer's
refusal of a micro-batch budget before any model loads."""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import pytest
import torch
from transformers import Qwen2ForCausalLM

import cobalt.shared.cpu_dtype
from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.cpu_dtype import read_cpu_flags
from cobalt.shared.errors import InvalidInput
from cobalt.trainer.batching import pack
from cobalt.trainer.equivalence import tiny_config
from cobalt.trainer.precision import (
    Precision,
    compute_choice,
    freeze,
    load_models,
    read_model,
    store_exactly_narrower,
)
from cobalt.trainer.settings import TrainerSettings, job_hyperparameters
from cobalt.trainer.step import Rollouts, make_optimizer, response_log_probs
from tests.trainer.conftest import CPU_WITH_AMX, CPU_WITHOUT_BF16
from tests.trainer.test_loop import FakeOrchestrator, trainer

CPU = torch.device("cpu")


@pytest.fixture
def model_dir(tiny_model: Qwen2ForCausalLM, tmp_path: Path) -> Path:
    directory = tmp_path / "model"
    tiny_model.save_pretrained(directory)
    return directory


def test_the_reference_is_absent_when_kl_coef_is_zero(model_dir: Path) -> None:
    settings = TrainerHyperparameters(kl_coef=0.0)
    policy, reference = load_models(model_dir, settings, Precision.resolve(settings, CPU), CPU)
    assert reference is None
    assert all(p.dtype == torch.float32 and p.requires_grad for p in policy.parameters())


def test_the_reference_is_frozen_in_the_compute_dtype(model_dir: Path) -> None:
    settings = TrainerHyperparameters(kl_coef=1e-4, compute_dtype="bfloat16")
    precision = Precision.resolve(settings, CPU)
    policy, reference = load_models(model_dir, settings, precision, CPU)
    assert reference is not None and not reference.training
    assert all(p.dtype == torch.bfloat16 and not p.requires_grad for p in reference.parameters())
    assert all(p.dtype == torch.float32 for p in policy.parameters())  # master weights
    optimized = {id(p) for group in make_optimizer(policy, settings).param_groups
                 for p in group["params"]}  # fmt: skip
    assert optimized.isdisjoint(id(p) for p in reference.parameters())
    for name, tensor in reference.state_dict().items():  # the starting weights
        assert torch.equal(tensor, policy.state_dict()[name].to(torch.bfloat16)), name


def test_a_config_draws_the_same_random_weights_for_policy_and_reference() -> None:
    """A config instead of a model directory (the GPU benchmark's real shapes without a
    download): seeded weights, the reference the policy's starting weights in the compute
    dtype, the caller's RNG untouched."""
    config = tiny_config("qwen3", heads=4, kv_heads=2, head_dim=16)
    settings = TrainerHyperparameters(kl_coef=1e-4, compute_dtype="bfloat16")
    precision = Precision.resolve(settings, CPU)
    state = torch.get_rng_state()
    policy, reference = load_models(config, settings, precision, CPU)
    assert torch.equal(torch.get_rng_state(), state)
    assert type(policy).__name__ == "Qwen3ForCausalLM" and reference is not None
    assert all(p.dtype == torch.float32 and p.requires_grad for p in policy.parameters())
    for name, tensor in reference.state_dict().items():
        assert tensor.dtype == torch.bfloat16
        assert torch.equal(tensor, policy.state_dict()[name].to(torch.bfloat16)), name
    again, _ = load_models(config, settings.model_copy(update={"kl_coef": 0.0}), precision, CPU)
    for name, tensor in again.state_dict().items():
        assert torch.equal(tensor, policy.state_dict()[name]), name
    # A LoRA job's base is drawn in the compute dtype, frozen: the same starting weights.
    base = read_model(config, torch.bfloat16)
    assert torch.equal(base.lm_head.weight, reference.lm_head.weight)


def test_a_float32_reference_of_bfloat16_weights_is_stored_in_bfloat16_and_scores_the_same(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    with torch.no_grad():  # a starting model shipped in bfloat16, as real ones are
        for parameter in tiny_model.parameters():
            parameter.copy_(parameter.to(torch.bfloat16))
    tiny_model.save_pretrained(tmp_path / "model")
    settings = TrainerHyperparameters(kl_coef=1e-4, compute_dtype="float32")
    _, reference = load_models(tmp_path / "model", settings, Precision.resolve(settings, CPU), CPU)
    assert reference is not None
    assert all(p.dtype == torch.bfloat16 for p in reference.parameters())
    wide = freeze(copy.deepcopy(tiny_model))
    batch = pack(Rollouts(prompt_ids=[[5, 9, 3], [12]], response_ids=[[7, 7, 21], [2, 30]],
                          rewards=[0.0, 1.0], group_ids=[0, 0]), pad_id=0)  # fmt: skip
    with torch.no_grad():
        got = response_log_probs(reference, batch, chunk_tokens=2, entropy="logged")
        want = response_log_probs(wide, batch, chunk_tokens=2, entropy="logged")
    assert torch.equal(got.log_probs, want.log_probs)  # bit for bit: the widening is exact
    assert got.entropy is not None and want.entropy is not None
    assert torch.equal(got.entropy, want.entropy)
    assert all(p.dtype == torch.bfloat16 for p in reference.parameters())  # narrow again


def test_weights_that_bfloat16_would_round_stay_as_they_are(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    frozen = freeze(tiny_model)  # random float32 weights: not bfloat16 values
    before = {n: t.clone() for n, t in frozen.state_dict().items()}
    assert not store_exactly_narrower(frozen)
    for name, tensor in frozen.state_dict().items():
        assert tensor.dtype == torch.float32 and torch.equal(tensor, before[name]), name
    with pytest.raises(ValueError, match="frozen"):
        store_exactly_narrower(Qwen2ForCausalLM(tiny_model.config))


def test_auto_settings_resolve_per_device() -> None:
    auto = TrainerHyperparameters()
    assert Precision.resolve(auto, CPU) == Precision(torch.float32, False, False)
    gpu = Precision.resolve(auto, torch.device("cuda"), sharded=True)
    assert gpu == Precision(torch.bfloat16, True, True)
    forced = TrainerHyperparameters(compute_dtype="float32", activation_checkpointing=False)
    assert Precision.resolve(forced, torch.device("cuda")) == Precision(torch.float32, False)
    assert not gpu.is_mixed or gpu.compute_dtype == torch.bfloat16


def test_auto_on_the_cpu_is_bfloat16_only_with_native_bfloat16(model_dir: Path) -> None:
    auto = TrainerHyperparameters(kl_coef=1e-4)
    amx, avx2 = read_cpu_flags(CPU_WITH_AMX), read_cpu_flags(CPU_WITHOUT_BF16)
    assert Precision.resolve(auto, CPU, cpu_flags=amx) == Precision(torch.bfloat16, False)
    assert Precision.resolve(auto, CPU, cpu_flags=avx2) == Precision(torch.float32, False)
    assert "amx_bf16" in compute_choice(auto, CPU, amx).reason
    forced = TrainerHyperparameters(compute_dtype="float32")
    assert Precision.resolve(forced, CPU, cpu_flags=amx).compute_dtype == torch.float32
    # The reference follows: loaded in bfloat16 for a bfloat16 forward.
    _, reference = load_models(model_dir, auto, Precision.resolve(auto, CPU, cpu_flags=amx), CPU)
    assert reference is not None
    assert {p.dtype for p in reference.parameters()} == {torch.bfloat16}


def test_the_trainer_says_its_compute_dtype_once_at_start_up(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    monkeypatch.setenv(cobalt.shared.cpu_dtype.CPUINFO_VARIABLE, str(CPU_WITH_AMX))
    with caplog.at_level(logging.INFO, logger="cobalt.trainer.loop"):
        assert trainer(FakeOrchestrator(model_dir), tmp_path / "ckpt").run(max_steps=1) == 1
    said = [r.getMessage() for r in caplog.records if "trainer compute" in r.getMessage()]
    assert said == ["trainer compute dtype bfloat16: this CPU computes bfloat16 natively "
                    "(amx_bf16, avx512_bf16)"]  # fmt: skip


def test_checkpointing_on_recomputes_layers(model_dir: Path) -> None:
    settings = TrainerHyperparameters(activation_checkpointing=True, kl_coef=0.0)
    policy, _ = load_models(model_dir, settings, Precision.resolve(settings, CPU), CPU)
    assert policy.is_gradient_checkpointing


def test_the_trainer_refuses_a_budget_below_the_longest_row_before_loading(
    tmp_path: Path,
) -> None:
    fake = FakeOrchestrator(tmp_path / "no-such-model")  # loading it would fail otherwise
    fake.params["trainer"] |= {"max_prompt_tokens": 64, "max_response_tokens": 64}
    run = trainer(fake, tmp_path / "ckpt", micro_batch_tokens=100)
    with pytest.raises(InvalidInput, match="COBALT_TRAINER_MICRO_BATCH_TOKENS.*at least 128"):
        run.run(max_steps=1)
    assert fake.claims == [] and fake.rounds == []


def test_the_trainer_budget_overrides_the_jobs() -> None:
    job = {"max_prompt_tokens": 64, "max_response_tokens": 64, "micro_batch_tokens": 4096}
    here = TrainerSettings(micro_batch_tokens=256)
    assert job_hyperparameters(job, here).token_budget == 256
    assert job_hyperparameters(job, TrainerSettings()).token_budget == 4096
    with pytest.raises(InvalidInput, match="lr"):
        job_hyperparameters({"lr": -1.0}, TrainerSettings())
