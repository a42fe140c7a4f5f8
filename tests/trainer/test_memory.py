"""The memory model's arithmetic (cobalt.trainer.memory); its agreement with measured
peaks is the bench's business (bench/trainer.py, docs/trainer.md)."""

from __future__ import annotations

from transformers import Qwen2ForCausalLM

from cobalt.trainer.memory import PAPER_MODELS, ModelShape, estimate_peak


def test_the_shape_counts_the_parameters_of_a_real_model(tiny_model: Qwen2ForCausalLM) -> None:
    config = tiny_model.config.to_dict()
    shape = ModelShape.from_config(config)
    # Qwen2's q/k/v projections carry biases, which the Llama-shaped count leaves out.
    biases = sum(p.numel() for n, p in tiny_model.named_parameters() if n.endswith(".bias"))
    assert shape.parameters + biases == sum(p.numel() for p in tiny_model.parameters())
    assert shape.root_parameters == 2 * 48 * 64 + 64


def test_state_shards_over_devices_and_activations_follow_the_budget() -> None:
    qwen = PAPER_MODELS["Qwen3-8B"]
    one, four = (estimate_peak(qwen, micro_batch_tokens=16_384, world=g, compute_bytes=2,
                               checkpointing=True) for g in (1, 4))  # fmt: skip
    assert four.sharded_state * 4 == one.sharded_state == 16 * qwen.parameters
    assert four.activations == one.activations  # per device, independent of G
    kept = estimate_peak(qwen, micro_batch_tokens=16_384, world=4, compute_bytes=2)
    assert kept.activations > 5 * four.activations  # checkpointing is what makes 16k fit
    half = estimate_peak(qwen, micro_batch_tokens=8_192, world=4, compute_bytes=2,
                         checkpointing=True)  # fmt: skip
    assert half.activations * 2 == four.activations
    no_kl = estimate_peak(qwen, micro_batch_tokens=16_384, world=4, compute_bytes=2,
                          checkpointing=True, reference=False)  # fmt: skip
    assert no_kl.reference == 0 and no_kl.total < four.total


def test_a_lora_job_holds_the_base_in_the_compute_dtype_and_the_adapter_state_only(
    tiny_model: Qwen2ForCausalLM,
) -> None:
    from peft import LoraConfig, get_peft_model

    shape = ModelShape.from_config(tiny_model.config.to_dict())
    wrapped = get_peft_model(tiny_model, LoraConfig(r=4, target_modules="all-linear"))
    trained = sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
    assert shape.lora_parameters(4) == trained  # the count peft makes for all-linear

    qwen = PAPER_MODELS["Qwen3-8B"]
    adapter = qwen.lora_parameters(16)
    full = estimate_peak(qwen, micro_batch_tokens=16_384, compute_bytes=2, checkpointing=True)
    lora = estimate_peak(qwen, micro_batch_tokens=16_384, compute_bytes=2, checkpointing=True,
                         lora_parameters=adapter)  # fmt: skip
    assert lora.sharded_state == 2 * qwen.parameters + 16 * adapter
    assert lora.reference == 0 and lora.gathered_weights == 0  # the base is the reference
    assert lora.activations == full.activations
    assert lora.total < 80 * 1024**3 < full.total  # one 80 GB GPU: LoRA fits, full does not
