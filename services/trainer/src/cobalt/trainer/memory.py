"""The trainer's peak memory per device, as a formula (docs/trainer.md, "Memory model").

Plain arithmetic over a model's shape and the training settings; no torch. The bench
(`bench/trainer.py`) prints it beside measured peaks, and `python -m cobalt.trainer.memory`
prints it for the paper's models on GPUs. Terms, in bytes, per device of G:

- sharded state: float32 weights, float32 gradients and AdamW's two float32 moments,
  16 P / G (AdamW fused: no temporaries the size of the weights); the frozen reference
  (only when kl_coef > 0) in the compute dtype, e P / G, or r P bytes when it is stored
  narrower than it computes (one process, float32 compute, bfloat16 weights: r = 2);
- gathered weights: under FSDP2 the root unit (embeddings, head, final norm) stays
  gathered through forward and backward, in the compute dtype, plus two decoder layers
  (the one computing and the one prefetched); in one process with bfloat16 autocast, its
  cache of the weights cast to bfloat16;
- activations of one micro-batch of T tokens, with A = 7 H + 4 H_kv + 4 I elements kept
  per token per layer (Llama/Qwen decoder layers: norms, q, k, v, RoPE, attention output,
  gate, up, SiLU, product), e bytes each: L T A e without checkpointing; with it, each
  layer's input L T H e plus one layer recomputed T A e; plus the gradient flowing back,
  about two such per-layer tensors; attention without a (T, T) matrix (flash /
  memory-efficient SDPA);
- log-probabilities: one chunk of C tokens' full-vocabulary logits, float32, two
  (C, V) buffers at a time (the logits and their shifted exponentials in the forward;
  in backward the logits, turned in place into their gradient, and the head's): 8 C V;
- a fixed runtime (the interpreter and libraries on the CPU; the CUDA context and the
  allocator's slack on a GPU).

A LoRA job (`lora_parameters` = the adapter's P_a) changes the state terms only: the
frozen base in the compute dtype, e P / G, instead of 16 P / G; the adapter's float32
weights, gradients and AdamW moments, 16 P_a / G; no reference (it is the base with the
adapter off); under FSDP2 only the policy's units are gathered; in one process the base
already is in the compute dtype, so autocast keeps no copy. Activations are the same
terms: each adapter reads the input its base layer keeps anyway, and its rank-r outputs
are a small fraction of a layer's (r << H).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["MemoryEstimate", "ModelShape", "estimate_peak"]

GIB = 1024**3
GPU_RUNTIME_BYTES = 2 * GIB
"""CUDA context, NCCL buffers and the caching allocator's fragmentation, per GPU."""


@dataclass(frozen=True)
class ModelShape:
    """What the memory model needs of a decoder-only transformer."""

    parameters: int
    hidden: int
    layers: int
    intermediate: int
    vocab: int
    kv_hidden: int
    tied: bool

    @classmethod
    def from_config(cls, config: dict[str, Any], parameters: int | None = None) -> ModelShape:
        """From a Hugging Face `config.json` (parameters counted when not given)."""
        hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
        intermediate, vocab = int(config["intermediate_size"]), int(config["vocab_size"])
        heads = int(config["num_attention_heads"])
        head_dim = int(config.get("head_dim") or hidden // heads)
        kv_hidden = int(config.get("num_key_value_heads") or heads) * head_dim
        tied = bool(config.get("tie_word_embeddings", False))
        if parameters is None:
            attention = hidden * heads * head_dim * 2 + hidden * kv_hidden * 2
            layer = attention + 3 * hidden * intermediate + 2 * hidden
            parameters = layers * layer + vocab * hidden * (1 if tied else 2) + hidden
        return cls(parameters, hidden, layers, intermediate, vocab, kv_hidden, tied)

    @property
    def root_parameters(self) -> int:
        """Embeddings, head and final norm: FSDP2's root unit."""
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    @property
    def layer_parameters(self) -> int:
        return (self.parameters - self.root_parameters) // self.layers

    def lora_parameters(self, rank: int) -> int:
        """Adapter parameters of rank `rank` on every linear layer of every decoder layer
        ("all-linear": q, k, v, o, gate, up, down; q's width taken as H): r (in + out)
        for each."""
        per_layer = 9 * self.hidden + 2 * self.kv_hidden + 3 * self.intermediate
        return rank * per_layer * self.layers

    @property
    def activation_elements_per_token_layer(self) -> int:
        return 7 * self.hidden + 4 * self.kv_hidden + 4 * self.intermediate


@dataclass(frozen=True)
class MemoryEstimate:
    """Peak bytes per device, term by term."""

    sharded_state: int
    reference: int
    gathered_weights: int
    activations: int
    logits: int
    runtime: int

    @property
    def total(self) -> int:
        return (
            self.sharded_state
            + self.reference
            + self.gathered_weights
            + self.activations
            + self.logits
            + self.runtime
        )

    def gib(self) -> dict[str, float]:
        return {name: round(value / GIB, 2) for name, value in asdict(self).items()} | {
            "total": round(self.total / GIB, 2)
        }


def estimate_peak(
    shape: ModelShape,
    *,
    micro_batch_tokens: int,
    world: int = 1,
    compute_bytes: int = 4,
    checkpointing: bool = False,
    reference: bool = True,
    chunk_tokens: int = 1024,
    runtime_bytes: int = 0,
    reference_bytes: int | None = None,
    lora_parameters: int | None = None,
) -> MemoryEstimate:
    """Peak memory of one trainer device (see the module docstring for each term).

    Args:
        shape: the model.
        micro_batch_tokens: T, prompt + response tokens in one forward/backward.
        world: G, devices sharing the model (FSDP2); 1 without sharding.
        compute_bytes: e, 2 for bfloat16 compute, 4 for float32.
        checkpointing: activation checkpointing per decoder layer.
        reference: a reference policy is held (kl_coef > 0).
        chunk_tokens: C, response tokens per chunk of full-vocabulary logits.
        runtime_bytes: the fixed runtime (measured on the CPU; GPU_RUNTIME_BYTES on GPUs).
        reference_bytes: bytes per reference parameter as stored; None: e.
        lora_parameters: P_a, a LoRA job's adapter parameters (`ModelShape.lora_parameters`);
            None: full fine-tuning.
    """
    p, e = shape.parameters, compute_bytes
    lora = lora_parameters is not None
    if lora_parameters is not None:  # the frozen base, the float32 adapter's full state
        sharded_state = (e * p + 16 * lora_parameters) // world
        reference = False  # the base with the adapter off: no bytes of its own
    else:
        sharded_state = 16 * p // world
    stored = e if reference_bytes is None else reference_bytes
    reference_total = stored * p // world if reference else 0
    if world > 1:
        gathered = e * (shape.root_parameters + 2 * shape.layer_parameters)
        if reference:  # the reference's units are gathered the same way, one at a time
            gathered += e * (shape.root_parameters + shape.layer_parameters)
    elif lora:
        gathered = 0  # the base is stored in the compute dtype: nothing to cast
    else:
        gathered = 2 * p if e == 2 else 0  # autocast's bfloat16 copies of the weights
    per_layer = micro_batch_tokens * shape.activation_elements_per_token_layer * e
    if checkpointing:
        activations = shape.layers * micro_batch_tokens * shape.hidden * e + 3 * per_layer
    else:
        activations = shape.layers * per_layer + 2 * per_layer
    logits = 8 * min(chunk_tokens, micro_batch_tokens) * shape.vocab
    return MemoryEstimate(
        sharded_state, reference_total, gathered, activations, logits, runtime_bytes
    )


PAPER_MODELS = {
    "Qwen3-8B": ModelShape(
        parameters=8_190_735_360,
        hidden=4096,
        layers=36,
        intermediate=12288,
        vocab=151_936,
        kv_hidden=8 * 128,
        tied=False,
    ),
    "R1-Distill-Llama-8B": ModelShape(
        parameters=8_030_261_248,
        hidden=4096,
        layers=32,
        intermediate=14336,
        vocab=128_256,
        kv_hidden=8 * 128,
        tied=False,
    ),
}
"""Shapes from the models' config.json (parameter counts as their model cards give)."""


def main() -> None:
    """Print the model's numbers for the paper's models on 80 GB GPUs."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--micro-batch-tokens", type=int, default=10_240 + 6_144)
    parser.add_argument("--gpu-gib", type=float, default=80.0)
    parser.add_argument("--config", type=Path, help="a config.json instead of the paper's models")
    parser.add_argument("--lora-rank", type=int, help="a LoRA job of this rank (all-linear)")
    args = parser.parse_args()
    models = dict(PAPER_MODELS)
    if args.config:
        models = {
            args.config.parent.name: ModelShape.from_config(json.loads(args.config.read_text()))
        }
    for name, shape in models.items():
        adapter = shape.lora_parameters(args.lora_rank) if args.lora_rank else None
        for world in (1, 2, 3, 4, 8):
            estimate = estimate_peak(
                shape,
                micro_batch_tokens=args.micro_batch_tokens,
                world=world,
                compute_bytes=2,
                checkpointing=True,
                runtime_bytes=GPU_RUNTIME_BYTES,
                lora_parameters=adapter,
            )
            fits = "fits" if estimate.total <= args.gpu_gib * GIB else "does not fit"
            lora = {"lora_rank": args.lora_rank, "adapter_parameters": adapter} if adapter else {}
            print(
                json.dumps(
                    {"model": name, "trainer_gpus": world, **lora, **estimate.gib(), "": fits}
                )
            )


if __name__ == "__main__":
    main()
