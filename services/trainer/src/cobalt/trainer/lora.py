"""LoRA adapters (peft): train an adapter over a frozen base model instead of every weight.

What changes when a job sets `lora_rank` (everything else, the loss and the loop, is the
same code as full fine-tuning):

- The base model is loaded frozen, in the compute dtype (bfloat16 on GPUs): it needs no
  float32 master copy, no gradient and no AdamW moments. The adapter (peft's `lora_A`,
  `lora_B` of every targeted linear layer) is float32 and is the only thing AdamW sees.
- The reference policy is the base model itself, with the adapter switched off for its
  forward (`BaseWithoutAdapter`): no second copy of the weights.
- A step's policy directory is the peft adapter directory (adapter_config.json,
  adapter_model.safetensors), megabytes instead of the model; the inference service loads
  it as the next adapter version (`POST /v1/policy/adapter`). The resume state holds the
  adapter's float32 weights and its optimizer state (checkpoint.py keeps only what
  training changes), so a resume is exact as with full weights.
- `merge` writes base + adapter as one plain model directory (`cobalt train export`).

Dropout on the adapter is 0: a GRPO step's log-probabilities must be the ones vLLM
serves, and a resumed step must replay bit for bit.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from cobalt.shared.checkpoints import POLICY_FILE
from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.shared.errors import InvalidInput

__all__ = [
    "ADAPTER_CONFIG",
    "ALL_LINEAR",
    "BaseWithoutAdapter",
    "add_adapter",
    "has_adapter",
    "is_adapter_dir",
    "merge",
    "trainable_names",
]

ADAPTER_CONFIG = "adapter_config.json"
ALL_LINEAR = "all-linear"
"""peft's shorthand for every linear layer but the output head (TRL's and verl's default)."""


def lora_config(settings: TrainerHyperparameters) -> Any:
    """peft's LoraConfig of the job's `lora_*` settings."""
    from peft import LoraConfig

    if settings.lora_rank is None:
        raise ValueError("lora_rank is not set: this job trains every weight")
    return LoraConfig(
        r=settings.lora_rank,
        lora_alpha=settings.lora_alpha or 2 * settings.lora_rank,
        target_modules=settings.lora_targets or ALL_LINEAR,
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )


ADAPTER_SEED = 0
"""Seed of the adapter's initial A matrices (B starts at zero)."""


def add_adapter(model: torch.nn.Module, settings: TrainerHyperparameters) -> torch.nn.Module:
    """`model` frozen, wrapped with a fresh adapter (float32, B = 0: the policy starts as
    the base model exactly).

    peft draws A from the torch RNG; it is drawn here from `ADAPTER_SEED` on a forked RNG,
    so the starting adapter depends on the model and the `lora_*` settings alone, as a
    full fine-tuning job's starting weights depend on the model alone: two jobs with the
    same settings start from the same adapter, and the trainer's own RNG is untouched.
    """
    from peft import get_peft_model

    for parameter in model.parameters():
        parameter.requires_grad_(False)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(ADAPTER_SEED)
            wrapped = get_peft_model(model, lora_config(settings), autocast_adapter_dtype=True)
    except ValueError as exc:  # peft names the targets it did not find
        raise InvalidInput(
            f"the job's lora_targets {settings.lora_targets} do not fit the model: {exc}"
        ) from exc
    for name, parameter in wrapped.named_parameters():
        if parameter.requires_grad and parameter.dtype != torch.float32:
            raise ValueError(f"adapter parameter {name} is {parameter.dtype}, not float32")
    return wrapped


def has_adapter(model: torch.nn.Module) -> bool:
    """Whether `model` is a peft model (plain or sharded) whose adapter can be switched off."""
    return callable(getattr(model, "disable_adapter", None))


def trainable_names(model: torch.nn.Module) -> set[str]:
    """State-dict names of the parameters training changes (all of them without LoRA)."""
    return {name for name, p in model.named_parameters() if p.requires_grad}


class BaseWithoutAdapter(torch.nn.Module):  # type: ignore[misc]
    """The reference policy of a LoRA job: the policy's own modules with the adapter off.

    It holds no parameters of its own (the peft model is kept outside the module tree,
    so nothing is counted, saved or moved twice); each forward runs the base weights
    alone, which are the job's starting model exactly.
    """

    def __init__(self, policy: torch.nn.Module) -> None:
        super().__init__()
        if not has_adapter(policy):
            raise ValueError(f"{type(policy).__name__} has no adapter to switch off")
        self.__dict__["policy"] = policy

    def get_decoder(self) -> torch.nn.Module:
        decoder: torch.nn.Module = self.__dict__["policy"].get_decoder()
        return decoder

    def get_output_embeddings(self) -> torch.nn.Module:
        head: torch.nn.Module = self.__dict__["policy"].get_output_embeddings()
        return head

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]:
        """The base's (frozen) parameters, so `next(reference.parameters())` finds the
        device as for a model of its own."""
        return (p for p in self.__dict__["policy"].parameters(recurse) if not p.requires_grad)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        policy = self.__dict__["policy"]
        with policy.disable_adapter():
            return policy(*args, **kwargs)


def is_adapter_dir(directory: Path) -> bool:
    """Whether `directory` holds a peft adapter rather than a whole model."""
    return (Path(directory) / ADAPTER_CONFIG).is_file()


def merge(
    adapter_dir: Path, base_model_dir: Path, out_dir: Path, *, dtype: torch.dtype | None = None
) -> Path:
    """Write base + adapter as one model directory (peft's `merge_and_unload`) that any
    server loads without LoRA support: the base's config and tokenizer files, the merged
    weights in `dtype` (default: the base's own dtype). Merged in float32, then cast.

    Raises:
        ValueError: `adapter_dir` is not a peft adapter directory.
    """
    from peft import PeftModel
    from transformers import AutoConfig, AutoModelForCausalLM

    if not is_adapter_dir(adapter_dir):
        raise ValueError(f"{adapter_dir} has no {ADAPTER_CONFIG}: not a LoRA adapter")
    base_dtype = getattr(AutoConfig.from_pretrained(base_model_dir), "dtype", None)
    target = dtype or (base_dtype if isinstance(base_dtype, torch.dtype) else torch.float32)
    base = AutoModelForCausalLM.from_pretrained(base_model_dir, dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    merged = merged.to(target)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    merged.save_pretrained(out_dir, safe_serialization=True)
    for item in Path(base_model_dir).iterdir():  # tokenizer, chat template, generation config
        if item.is_file() and item.suffix in (".json", ".jinja", ".txt", ".model"):
            skipped = item.name.endswith("index.json") or item.name == POLICY_FILE
            if not skipped and not (out_dir / item.name).exists():
                shutil.copy2(item, out_dir / item.name)
    if (Path(adapter_dir) / POLICY_FILE).is_file():  # the policy version it was served as
        shutil.copy2(Path(adapter_dir) / POLICY_FILE, out_dir / POLICY_FILE)
    provenance = {"base_model": str(base_model_dir), "adapter": str(adapter_dir)}
    (out_dir / "cobalt-merged.json").write_text(json.dumps(provenance, indent=2) + "\n")
    return out_dir
