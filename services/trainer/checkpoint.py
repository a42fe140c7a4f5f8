"""Step checkpoints: everything to resume a job exactly, and the weights inference loads.

Layout under the checkpoint root, one directory per job:

    job-<id>/step-<k>/policy/            the Hugging Face model directory inference loads:
                                         config.json, model.safetensors (embeddings
                                         untied), the base model's tokenizer files and
                                         cobalt-policy.json {"version", "step", "job"}
    job-<id>/step-<k>/trainer-state.pt   optimizer state, step, policy version, the RNG
                                         states (torch, numpy, python) and the settings

A checkpoint is written into `.step-<k>.partial` and renamed when complete, so a directory
named `step-<k>` is always whole: a trainer killed while writing leaves only a partial
directory, which the next write replaces. Only the newest `keep` checkpoints are kept.

Under torchrun (FSDP) the weights and optimizer state are sharded over the ranks. Saving
gathers full (unsharded) state dicts onto rank 0's CPU (`torch.distributed.checkpoint`'s
`get_*_state_dict`, a collective every rank joins), and rank 0 alone writes; loading reads
on rank 0 and scatters to the shards (`broadcast_from_rank0`). One format serves one
process and many: the optimizer state is keyed by parameter name, so a job checkpointed
on G GPUs resumes on any other count. The RNG states saved are rank 0's (a GRPO step
draws no random numbers: sampling happened in vLLM, dropout is off).
"""

from __future__ import annotations

import json
import random
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

from cobalt.shared.checkpoints import read_policy_version, write_policy_version
from cobalt.trainer.distributed import rank_and_size

__all__ = [
    "POLICY_DIR",
    "STATE_FILE",
    "Checkpoint",
    "job_checkpoint_root",
    "latest_checkpoint",
    "load_checkpoint",
    "save_checkpoint",
]

POLICY_DIR = "policy"
STATE_FILE = "trainer-state.pt"
_STEP = re.compile(r"^step-(\d+)$")
_WEIGHT_FILES = re.compile(r"(\.safetensors|\.bin|\.pt|\.index\.json)$|^config\.json$")
"""Files of the base model directory that the checkpoint writes itself."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A complete checkpoint on disk."""

    path: Path
    step: int
    policy_version: int

    @property
    def policy_dir(self) -> Path:
        """The model directory the inference service loads."""
        return self.path / POLICY_DIR


def job_checkpoint_root(root: Path, job_id: int) -> Path:
    return root / f"job-{job_id}"


def _rng_state() -> dict[str, Any]:
    return {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }


def _restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])


def save_checkpoint(
    root: Path,
    *,
    job_id: int,
    step: int,
    policy_version: int,
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    base_model_dir: Path,
    settings: dict[str, Any],
    keep: int = 2,
    serve_dtype: torch.dtype | None = None,
) -> Checkpoint:
    """Write step `step`'s checkpoint atomically and delete all but the newest `keep`.

    `keep` is at least 2: the inference service serves the previous step's directory and
    reads it again to check the next load against, so it must outlive the next write.

    `policy_version` is the version the saved weights will be served as. With
    `serve_dtype` (the base model's, e.g. bfloat16) the policy directory holds the weights
    in that dtype, as the inference service's pre-checks require, and the trainer's own
    full-precision weights go into the trainer state, so a resume is still exact.
    """
    if keep < 2:
        raise ValueError("keep at least 2 checkpoints: the serving one must outlive the next")
    job_root = job_checkpoint_root(root, job_id)
    final = job_root / f"step-{step}"
    # Every rank joins the gathering; the full state lands on rank 0 only.
    full = StateDictOptions(full_state_dict=True, cpu_offload=True)
    weights = get_model_state_dict(model, options=full)
    optimizer_state = get_optimizer_state_dict(model, optimizer, options=full)
    rank, world = rank_and_size()
    if rank == 0:
        _write(
            job_root, final, step=step, policy_version=policy_version, model=model,
            weights=weights, optimizer_state=optimizer_state, base_model_dir=base_model_dir,
            settings=settings, keep=keep, serve_dtype=serve_dtype, job_id=job_id,
        )  # fmt: skip
    if world > 1:
        dist.barrier()  # no rank goes on (and no inference load starts) before it is whole
    return Checkpoint(final, step, policy_version)


def _write(
    job_root: Path,
    final: Path,
    *,
    job_id: int,
    step: int,
    policy_version: int,
    model: torch.nn.Module,
    weights: dict[str, Any],
    optimizer_state: dict[str, Any],
    base_model_dir: Path,
    settings: dict[str, Any],
    keep: int,
    serve_dtype: torch.dtype | None,
) -> None:
    job_root.mkdir(parents=True, exist_ok=True)
    partial = job_root / f".step-{step}.partial"
    if partial.exists():
        shutil.rmtree(partial)
    policy = partial / POLICY_DIR
    converted = serve_dtype is not None and any(
        t.is_floating_point() and t.dtype != serve_dtype for t in weights.values()
    )
    served = weights
    if converted:
        served = {k: t.to(serve_dtype) if t.is_floating_point() else t for k, t in weights.items()}
    # The gathered dict, not the (possibly sharded) module's own state.
    model.save_pretrained(policy, state_dict=served, safe_serialization=True)
    if converted:
        config = json.loads((policy / "config.json").read_text(encoding="utf-8"))
        config["dtype"] = str(serve_dtype).removeprefix("torch.")  # what the file holds
        (policy / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    for item in Path(base_model_dir).iterdir():  # tokenizer, chat template, generation config
        if (
            item.is_file()
            and not _WEIGHT_FILES.search(item.name)
            and not (policy / item.name).exists()
        ):
            shutil.copy2(item, policy / item.name)
    write_policy_version(policy, policy_version, step=step, job=job_id)
    torch.save(
        {
            "step": step,
            "policy_version": policy_version,
            "optimizer": optimizer_state,
            "rng": _rng_state(),
            "settings": settings,
            "master_weights": {k: t.detach().cpu() for k, t in weights.items()}
            if converted
            else None,
        },
        partial / STATE_FILE,
    )
    if final.exists():  # the same step written again after a crash: replace it whole
        shutil.rmtree(final)
    partial.rename(final)
    for old in _complete_steps(job_root)[:-keep]:
        shutil.rmtree(job_root / f"step-{old}", ignore_errors=True)


def _complete_steps(job_root: Path) -> list[int]:
    steps = []
    for entry in job_root.iterdir() if job_root.is_dir() else []:
        match = _STEP.match(entry.name)
        if match and (entry / STATE_FILE).is_file() and (entry / POLICY_DIR).is_dir():
            steps.append(int(match.group(1)))
    return sorted(steps)


def latest_checkpoint(root: Path, job_id: int) -> Checkpoint | None:
    """The newest complete checkpoint of the job, or None."""
    job_root = job_checkpoint_root(root, job_id)
    steps = _complete_steps(job_root)
    if not steps:
        return None
    path = job_root / f"step-{steps[-1]}"
    # The version is in the small policy file; the trainer state (GBs for a real model)
    # is read once, by load_checkpoint.
    version = read_policy_version(path / POLICY_DIR)
    if version is None:
        raise ValueError(f"{path / POLICY_DIR} has no policy version file")
    return Checkpoint(path, steps[-1], version)


def load_checkpoint(
    checkpoint: Checkpoint, *, model: torch.nn.Module, optimizer: torch.optim.Optimizer
) -> dict[str, Any]:
    """Put the checkpoint's weights, optimizer and RNG states back; returns its state
    (without the weights; under torchrun, every rank gets rank 0's step and version).

    The weights (the full-precision copy when the served ones were converted, else the
    policy directory's safetensors) are copied into the live model, so the model object
    and the optimizer's references to its parameters stay the same. Every rank calls this;
    only rank 0 reads the files.
    """
    rank, world = rank_and_size()
    weights: dict[str, torch.Tensor] = {}
    optimizer_state: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    if rank == 0:
        state, weights = _read(checkpoint)
        optimizer_state = state.pop("optimizer")
        summary = state
        expected = set(get_model_state_dict(model).keys()) if world == 1 else None
        if expected is not None:
            missing = [n for n in expected - weights.keys() if not n.endswith("inv_freq")]
            if missing or weights.keys() - expected:
                raise ValueError(
                    f"{checkpoint.policy_dir} does not fit the model: missing "
                    f"{sorted(missing)[:5]}, unexpected {sorted(weights.keys() - expected)[:5]}"
                )
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=world > 1, strict=False)
    set_model_state_dict(model, weights, options=options)
    set_optimizer_state_dict(model, optimizer, optimizer_state, options=options)
    if world > 1:
        shared = [summary]
        dist.broadcast_object_list(shared, src=0)
        summary = shared[0]
    if rank == 0:
        _restore_rng(summary.pop("rng"))
    else:
        summary.pop("rng", None)
    return summary


def _read(checkpoint: Checkpoint) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """The trainer state and the full-precision weights of a checkpoint."""
    from safetensors.torch import load_file

    state: dict[str, Any] = torch.load(
        checkpoint.path / STATE_FILE, map_location="cpu", weights_only=False
    )
    weights: dict[str, torch.Tensor] = state.pop("master_weights", None) or {}
    if not weights:
        for file in sorted(checkpoint.policy_dir.glob("*.safetensors")):
            weights.update(load_file(file))
    return state, weights
