"""How the policy computes: dtype, activation checkpointing, and the reference's copy.

Weights and AdamW moments are float32 always (the master copy); only the forward and
backward run in bfloat16 when asked (`compute_dtype`), the way verl and OpenRLHF train:
bfloat16 gradients alone would lose updates of lr 1e-6 against weights of order 1e-2.

- Under FSDP2 (torchrun) the cast is FSDP2's `MixedPrecisionPolicy`: each unit's
  parameters are gathered in bfloat16 and gradients reduced in float32
  (`distributed.shard_model(..., mixed_precision=True)`).
- In one process it is `torch.autocast` around the forward (`Precision.autocast`), on
  CUDA or the CPU alike. On the CPU `auto` follows `cobalt.shared.cpu_dtype`: bfloat16
  where the CPU computes it natively (avx512_bf16 / amx_bf16), else float32.

Activation checkpointing is Hugging Face's per-decoder-layer checkpointing (non-reentrant
`torch.utils.checkpoint`): the module tree and its state-dict names stay as they are, so
checkpoints and weight publishing do not change. The reference policy (only when
`kl_coef > 0`) is loaded in the compute dtype, frozen, with no gradient or optimizer state.

A float32 reference whose every weight is a bfloat16 value (the usual case: it is the
job's starting model, shipped in bfloat16) is stored in bfloat16 and each module's own
weights are widened to float32 for its forward only (`store_exactly_narrower`): half the
bytes, and bit for bit the same log-probabilities, since the widening is exact.

The models come from a model directory, or from a Hugging Face config alone: random
weights of that shape (`read_model`), so the benchmarks measure real shapes on a GPU
with no download (bench/gpu_trainer.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import torch

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.cpu_dtype import DtypeChoice, choose_cpu_dtype
from cobalt.trainer.distributed import shard_model

if TYPE_CHECKING:
    from transformers import PretrainedConfig

    ModelSource: TypeAlias = Path | PretrainedConfig
    """A model directory, or a config whose random weights stand in for one."""

__all__ = [
    "Precision",
    "compute_choice",
    "enable_activation_checkpointing",
    "freeze",
    "load_models",
    "load_reference",
    "read_model",
    "store_exactly_narrower",
]

RANDOM_WEIGHTS_SEED = 0
"""Seed of the weights `read_model` draws for a config: the policy and the reference drawn
from one config start from the same weights (each drawn in float32, then cast)."""


@dataclass(frozen=True)
class Precision:
    """The compute settings of one trainer process, resolved for its device."""

    compute_dtype: torch.dtype = torch.float32
    activation_checkpointing: bool = False
    sharded: bool = False
    """FSDP2 casts (its mixed-precision policy); otherwise autocast does."""

    @classmethod
    def resolve(
        cls,
        settings: TrainerHyperparameters,
        device: torch.device,
        *,
        sharded: bool = False,
        cpu_flags: Iterable[str] | None = None,
    ) -> Precision:
        """`auto` and None settings made concrete: bfloat16 and checkpointing on GPUs; on
        the CPU the compute dtype of `compute_choice`, no checkpointing."""
        on_gpu = device.type == "cuda"
        dtype = getattr(torch, compute_choice(settings, device, cpu_flags).dtype)
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


def compute_choice(
    settings: TrainerHyperparameters, device: torch.device, cpu_flags: Iterable[str] | None = None
) -> DtypeChoice:
    """The compute dtype and why (the trainer logs it once at start-up). `cpu_flags` None
    reads this machine's."""
    if settings.compute_dtype != "auto":
        return DtypeChoice(settings.compute_dtype, "set by compute_dtype")
    if device.type == "cuda":
        return DtypeChoice("bfloat16", "auto on a GPU")
    return choose_cpu_dtype(cpu_flags)


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


def store_exactly_narrower(model: torch.nn.Module, storage: torch.dtype = torch.bfloat16) -> bool:
    """Keep a frozen model's parameters in `storage` when every one of them converts there
    and back unchanged; each module then gets its own parameters back in their original
    dtype for the length of its forward (a pre-hook widens them, a post-hook drops the
    wide copies). Returns whether it did: False leaves the model untouched.

    The forward computes with exactly the values it had, so its outputs are bit for bit
    the same; what changes is that at most one module's wide copy exists at a time.
    """
    parameters = list(model.parameters())
    if not parameters or any(p.requires_grad for p in parameters):
        raise ValueError("only a frozen model's parameters can be stored narrower")
    compute = parameters[0].dtype
    if any(p.dtype != compute for p in parameters) or storage.itemsize >= compute.itemsize:
        return False
    with torch.no_grad():
        if not all(torch.equal(p.to(storage).to(compute), p) for p in parameters):
            return False
        for module in model.modules():
            own = [name for name, _ in module.named_parameters(recurse=False)]
            if not own:
                continue
            for name in own:
                narrow = module._parameters[name]
                assert narrow is not None
                module._parameters[name] = torch.nn.Parameter(
                    narrow.to(storage), requires_grad=False
                )
            module.register_forward_pre_hook(_widen(own, compute))
            module.register_forward_hook(_narrow_again(own), always_call=True)
    return True


def _widen(names: list[str], dtype: torch.dtype) -> Any:
    def hook(module: torch.nn.Module, _args: Any) -> None:
        stored = {name: module._parameters[name] for name in names}
        module.__dict__["_cobalt_stored"] = stored
        for name, narrow in stored.items():
            assert narrow is not None
            module._parameters[name] = torch.nn.Parameter(narrow.to(dtype), requires_grad=False)

    return hook


def _narrow_again(names: list[str]) -> Any:
    def hook(module: torch.nn.Module, _args: Any, _output: Any) -> None:
        stored = module.__dict__.pop("_cobalt_stored", None)
        if stored is not None:
            module._parameters.update(stored)

    return hook


def read_model(
    source: ModelSource, dtype: torch.dtype, device: torch.device | None = None
) -> torch.nn.Module:
    """A causal LM in `dtype`: read from a model directory, or, for a config, drawn at
    random (seeded, on a forked RNG) directly on `device`, so a GPU benchmark of an 8B
    shape neither downloads weights nor builds them on the CPU first."""
    from transformers import AutoModelForCausalLM, PretrainedConfig

    if not isinstance(source, PretrainedConfig):
        return AutoModelForCausalLM.from_pretrained(source, dtype=dtype)
    where = device or torch.device("cpu")
    with torch.random.fork_rng(devices=[where] if where.type == "cuda" else []):
        torch.manual_seed(RANDOM_WEIGHTS_SEED)
        with where:
            model = AutoModelForCausalLM.from_config(source, dtype=torch.float32)
        return model.to(dtype)


def load_reference(
    model_dir: ModelSource, precision: Precision, device: torch.device | None = None
) -> torch.nn.Module:
    """The frozen reference policy on the CPU: the job's starting weights, in the compute
    dtype (the caller shards it like the policy, or moves it to the device).

    Loaded from the model directory rather than copied from the policy, so it never costs
    a float32 copy and is the starting model on resume too. In one process, float32 weights
    that are all bfloat16 values are stored in bfloat16 (`store_exactly_narrower`); FSDP2
    keeps its own copies, so a sharded reference stays as loaded.
    """
    reference = freeze(read_model(model_dir, precision.compute_dtype, device))
    if not precision.sharded:
        store_exactly_narrower(reference)
    return reference


def load_models(
    model_dir: ModelSource,
    settings: TrainerHyperparameters,
    precision: Precision,
    device: torch.device,
) -> tuple[torch.nn.Module, torch.nn.Module | None]:
    """The policy (float32 master weights, or a float32 LoRA adapter over a frozen base)
    and the reference (None when `kl_coef` is 0),
    sharded with FSDP2 when `precision.sharded`, else on `device`.

    Each is read on the CPU and then sharded (FSDP2 moves each unit's shard to the device
    as it shards it) or moved, the policy before the reference is read: a rank never
    holds the whole model on its GPU, and holds one full copy at a time in host memory.
    Random weights of a config are drawn where they will run (on the CPU when sharded).
    """
    drawn_on = None if precision.sharded else device

    def placed(model: torch.nn.Module) -> torch.nn.Module:
        if precision.sharded:
            return shard_model(model, precision.compute_dtype)
        return model.to(device)

    if settings.lora:
        return _load_with_adapter(model_dir, settings, precision, placed, drawn_on)
    policy = read_model(model_dir, torch.float32, drawn_on)
    if precision.activation_checkpointing:
        enable_activation_checkpointing(policy)
    policy = placed(policy)
    reference = None
    if settings.kl_coef > 0:
        reference = placed(load_reference(model_dir, precision, drawn_on))
    return policy, reference


def _load_with_adapter(
    model_dir: ModelSource,
    settings: TrainerHyperparameters,
    precision: Precision,
    placed: Any,
    drawn_on: torch.device | None,
) -> tuple[torch.nn.Module, torch.nn.Module | None]:
    """A LoRA job (lora.py): the base frozen in the compute dtype (no master copy: it never
    changes), a float32 adapter over it, and the same base with the adapter off as the
    reference when `kl_coef > 0`."""
    from cobalt.trainer.lora import BaseWithoutAdapter, add_adapter

    base = read_model(model_dir, precision.compute_dtype, drawn_on)
    if precision.activation_checkpointing:
        enable_activation_checkpointing(base)
        # The frozen embeddings' output needs a gradient for checkpointed layers to
        # backpropagate into the adapters inside them.
        base.enable_input_require_grads()
    policy = placed(add_adapter(base, settings))
    reference = BaseWithoutAdapter(policy) if settings.kl_coef > 0 else None
    return policy, reference
