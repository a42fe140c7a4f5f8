"""LoRA jobs (cobalt.trainer.lora): what trains, what the reference is, the export.

The loop's LoRA runs (publishing the adapter, an exact resume) are in test_loop.py; vLLM
serving a trained adapter is in tests/inference/test_lora.py.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError
from transformers import AutoModelForCausalLM, Qwen2ForCausalLM

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.errors import InvalidInput
from cobalt.trainer.batching import PackedBatch, pack
from cobalt.trainer.checkpoint import CheckpointStore
from cobalt.trainer.equivalence import lora_check, tiny_config
from cobalt.trainer.export import ExportError, export_merged
from cobalt.trainer.lora import merge
from cobalt.trainer.precision import Precision, load_models
from cobalt.trainer.step import Rollouts, make_optimizer, response_log_probs, train_step

LORA = TrainerHyperparameters(
    lora_rank=4, lr=1e-2, kl_coef=1e-3, n_samples=2, contexts_per_step=2, updates_per_step=1
)


@pytest.fixture
def model_dir(tiny_model: Qwen2ForCausalLM, tmp_path: Path) -> Path:
    directory = tmp_path / "model"
    tiny_model.save_pretrained(directory)
    return directory


def rollouts(seed: int = 0) -> Rollouts:
    rng = random.Random(seed)
    responses = [[rng.randrange(1, 48) for _ in range(rng.randint(2, 6))] for _ in range(4)]
    return Rollouts(
        prompt_ids=[[5, 9, 3, 17, i] for i in range(4)],
        response_ids=responses,
        rewards=[1.0, 0.0, 0.5, -0.1],
        group_ids=[0, 0, 1, 1],
        old_log_probs=None,
    )


def batch(data: Rollouts) -> PackedBatch:
    return pack(data, pad_id=0)


def log_probs(model: torch.nn.Module, data: Rollouts) -> torch.Tensor:
    with torch.no_grad():
        return response_log_probs(model, batch(data), entropy="none").log_probs


def test_only_the_adapter_trains_and_the_reference_is_the_base_with_it_off() -> None:
    comparison = lora_check(tiny_config(), device=torch.device("cpu"))

    assert comparison.facts["trained_tensors"] > 0
    assert comparison.facts["trained_outside_adapter"] == 0  # lora_A and lora_B only
    assert comparison.facts["optimized_tensors"] == comparison.facts["trained_tensors"]
    assert comparison.facts["reference_parameters_of_its_own"] == 0  # no second copy
    # B = 0 at the start; the adapter off is the base; the base never changes. Exactly.
    for name in ("policy_at_start", "reference_after_step", "base_weights_after_step"):
        assert comparison.differences[name].max_abs == 0, name
    assert comparison.facts["policy_moved"] > 1e-4  # the adapter moved


def test_without_kl_there_is_no_reference(model_dir: Path) -> None:
    settings = LORA.model_copy(update={"kl_coef": 0.0})
    _, reference = load_models(model_dir, settings, Precision(), torch.device("cpu"))
    assert reference is None


def test_lora_settings_without_a_rank_are_refused_with_the_fix() -> None:
    with pytest.raises(ValidationError, match="set lora_rank too"):
        TrainerHyperparameters(lora_alpha=32)
    with pytest.raises(ValidationError, match="set lora_rank too"):
        TrainerHyperparameters(lora_targets=["q_proj"])


def test_targets_limit_the_adapter_and_unknown_ones_are_named(model_dir: Path) -> None:
    settings = LORA.model_copy(update={"lora_targets": ["q_proj", "v_proj"]})
    policy, _ = load_models(model_dir, settings, Precision(), torch.device("cpu"))
    trained = {n for n, p in policy.named_parameters() if p.requires_grad}
    assert trained and all(".q_proj." in n or ".v_proj." in n for n in trained)
    wrong = LORA.model_copy(update={"lora_targets": ["no_such_proj"]})
    with pytest.raises(InvalidInput, match="no_such_proj"):  # the CLI exits 2 with it
        load_models(model_dir, wrong, Precision(), torch.device("cpu"))


def test_bfloat16_keeps_the_base_narrow_and_the_adapter_float32(model_dir: Path) -> None:
    settings = LORA.model_copy(update={"compute_dtype": "bfloat16"})
    precision = Precision.resolve(settings, torch.device("cpu"))
    policy, reference = load_models(model_dir, settings, precision, torch.device("cpu"))
    dtypes = {p.requires_grad: p.dtype for p in policy.parameters()}
    assert dtypes == {True: torch.float32, False: torch.bfloat16}
    optimizer = make_optimizer(policy, settings)
    train_step(policy, reference, optimizer, rollouts(), settings, precision=precision)


def test_the_merged_export_scores_like_base_plus_adapter(model_dir: Path, tmp_path: Path) -> None:
    torch.manual_seed(0)
    policy, reference = load_models(model_dir, LORA, Precision(), torch.device("cpu"))
    optimizer = make_optimizer(policy, LORA)
    data = rollouts()
    train_step(policy, reference, optimizer, data, LORA)
    store = CheckpointStore(tmp_path / "ckpt", 3, base_model_dir=model_dir)
    store.save_weights(step=1, policy_version=1, model=policy)

    export_merged(tmp_path / "ckpt", 3, tmp_path / "merged")

    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
    assert not any("lora" in name for name in merged.state_dict())
    assert torch.allclose(log_probs(merged, data), log_probs(policy, data), atol=1e-5)
    with pytest.raises(ExportError, match="not empty"):
        export_merged(tmp_path / "ckpt", 3, tmp_path / "merged")
    with pytest.raises(ExportError, match="no published step"):
        export_merged(tmp_path / "ckpt", 4, tmp_path / "other")


def test_a_full_weight_job_has_nothing_to_merge(model_dir: Path, tmp_path: Path) -> None:
    settings = TrainerHyperparameters(kl_coef=0.0)
    policy, _ = load_models(model_dir, settings, Precision(), torch.device("cpu"))
    CheckpointStore(tmp_path / "ckpt", 3, base_model_dir=model_dir).save_weights(
        step=1, policy_version=1, model=policy
    )
    with pytest.raises(ExportError, match="not a LoRA adapter"):
        export_merged(tmp_path / "ckpt", 3, tmp_path / "merged")
    with pytest.raises(ValueError, match="not a LoRA adapter"):
        merge(tmp_path / "ckpt" / "job-3" / "step-1" / "policy", model_dir, tmp_path / "m")


def test_the_starting_adapter_depends_on_the_settings_alone(model_dir: Path) -> None:
    """Two jobs (trainers seeded by their job ids) start from the same adapter, as two
    full fine-tuning jobs start from the same model; the trainer's RNG is not drawn."""
    adapters = []
    for seed in (3, 4):
        torch.manual_seed(seed)
        state = torch.get_rng_state()
        policy, _ = load_models(model_dir, LORA, Precision(), torch.device("cpu"))
        assert torch.equal(torch.get_rng_state(), state)
        adapters.append({n: p for n, p in policy.named_parameters() if p.requires_grad})
    assert adapters[0].keys() == adapters[1].keys()
    assert all(torch.equal(adapters[0][n], adapters[1][n]) for n in adapters[0])
