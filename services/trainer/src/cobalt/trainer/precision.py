"""How the policy computes: dtype, activation checkpointing, and the reference's copy.

Weights and AdamW moments are float32 always (the master copy); only the forward and
backward run in bfloat16 when asked (`compute_dtype`), the way verl and OpenRLHF train:
bfloat16 gradients alone would lose updates of lr 1e-6 against weights of order 1e-2.

- Under FSDP2 (torchrun) the cast is FSDP2's `MixedPrecisionPolicy`: each unit's
  parameters are gathered in bfloat16 and gradients reduced in float32
  (`distributed.shard_model(..., mixed_precision=True)`).
- In one process it is `torch.autocast` around the forward (`Precision.autocast`), on
  CUDA or the CPU alike; the CPU defaults to float32 but runs bfloat16 when set.

Activation checkpointing is Hugging Face's per-decoder-layer checkpointing (non-reentrant
`torch.utils.checkpoint`): the module tree and its state-dict names stay as they are, so
checkpoints and weight publishing do not change. The reference policy (only when
`kl_coef > 0`) is loaded in the compute dtype, frozen, with no gradient or optimizer state.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.distributed import shard_model

__all__ = [
    "Precision",
    "enable_activation_checkpointing",
    "freeze",
    "load_models",
    "load_reference",
]


@dataclass(frozen=True)
class Precision:
    """The compute settings of one trainer process, resolved for its device."""

    compute_dtype: torch.dtype = torch.float32
    activation_checkpointing: bool = False
    sharded: bool = False
    """FSDP2 casts (its mixed-precision policy); otherwise autocast does."""

    @classmethod
    def resolve(
        cls, settings: TrainerHyperparameters, device: torch.device, *, sharded: bool = False
    ) -> Precision:
        """`auto` and None settings made concrete: bfloat16 and checkpointing on GPUs."""
        on_gpu = device.type == "cuda"
        if settings.compute_dtype == "auto":
            dtype = torch.bfloat16 if on_gpu else torch.float32
        else:
            dtype = getattr(torch, settings.compute_dtype)
        checkpointing = settings.activation_checkpointing
        return cls(dtype, on_gpu if checkpointing is None else checkpointing, sharded)

    @property
    def is_mixed(self) -> bool:
        return bool(self.compute_dtype != torch.float32)

    @contextlib.contextmanager
    def autocast(self, device: torch.device) -> Iterator[None]:
        """The forward's cast in one process (FSDP2's policy casts when sharded)."""
        if self.is_mixed and not self.sharded:
            with torch.autocast(device_type=device.type, dtype=self.compute_dtype):
                yield
        else:
            yield


def enable_activation_checkpointing(model: torch.nn.Module) -> None:
    """Recompute each decoder layer in backward (Hugging Face, non-reentrant)."""
    enable = getattr(model, "gradient_checkpointing_enable", None)
    if enable is None or not getattr(model, "supports_gradient_checkpointing", False):
        raise ValueError(f"{type(model).__name__} does not support activation checkpointing")
    enable(gradient_checkpointing_kwargs={"use_reentrant": False})


def freeze(model: torch.nn.Module) -> torch.nn.Module:
    """No gradient, evaluation mode: a model that only scores."""
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


def load_reference(model_dir: Path, precision: Precision) -> torch.nn.Module:
    """The frozen reference policy on the CPU: the job's starting weights, in the compute
    dtype (the caller shards it like the policy, or moves it to the device).

    Loaded from the model directory rather than copied from the policy, so it never costs
    a float32 copy and is the starting model on resume too.
    """
    from transformers import AutoModelForCausalLM

    reference = AutoModelForCausalLM.from_pretrained(model_dir, dtype=precision.compute_dtype)
    return freeze(reference)


def load_models(
    model_dir: Path,
    settings: TrainerHyperparameters,
    precision: Precision,
    device: torch.device,
) -> tuple[torch.nn.Module, torch.nn.Module | None]:
    """The policy (float32 master weights) and the reference (None when `kl_coef` is 0),
    sharded with FSDP2 when `precision.sharded`, else on `device`.

    Each is read on the CPU and then sharded (FSDP2 moves each unit's shard to the device
    as it shards it) or moved, the policy before the reference is read: a rank never
    holds the whole model on its GPU, and holds one full copy at a time in host memory.
    """
    from transformers import AutoModelForCausalLM

    def placed(model: torch.nn.Module) -> torch.nn.Module:
        if precision.sharded:
            return shard_model(model, precision.compute_dtype)
        return model.to(device)

    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if precision.activation_checkpointing:
        enable_activation_checkpointing(policy)
    policy = placed(policy)
    reference = placed(load_reference(model_dir, precision)) if settings.kl_coef > 0 else None
    return policy, reference
