"""`cobalt trainer export` (and `cobalt train export`): a LoRA job's policy as one model.

A LoRA job's checkpoints hold adapters; serving one elsewhere (another vLLM without LoRA,
llama.cpp after conversion, a Hub upload) wants base + adapter merged into plain weights.
The step's adapter directory names its base model (peft's `base_model_name_or_path`, the
job's model directory), so nothing but the checkpoint root is needed.
"""

from __future__ import annotations

import json
from pathlib import Path

from cobalt.shared.errors import InvalidInput
from cobalt.trainer.checkpoint import Checkpoint, job_checkpoint_root, latest_weights
from cobalt.trainer.lora import ADAPTER_CONFIG, is_adapter_dir, merge

__all__ = ["ExportError", "export_merged"]


class ExportError(InvalidInput):
    """Nothing to export: no such step, not a LoRA job, or the base model is gone."""


def export_merged(
    checkpoint_root: Path,
    job_id: int,
    out_dir: Path,
    *,
    step: int | None = None,
    base_model_dir: Path | None = None,
) -> Checkpoint:
    """Merge step `step`'s adapter (default: the newest published) into its base model
    and write it to `out_dir`; returns the step's checkpoint."""
    checkpoint = _step(checkpoint_root, job_id, step)
    adapter = checkpoint.policy_dir
    if not is_adapter_dir(adapter):
        raise ExportError(
            f"job {job_id} step {checkpoint.step} holds whole weights, not a LoRA adapter: "
            f"serve {adapter} as it is"
        )
    if base_model_dir is None:
        config = json.loads((adapter / ADAPTER_CONFIG).read_text(encoding="utf-8"))
        recorded = config.get("base_model_name_or_path")
        if not recorded:
            raise ExportError(f"{adapter / ADAPTER_CONFIG} names no base model: pass --base-model")
        base_model_dir = Path(recorded)
    if not (Path(base_model_dir) / "config.json").is_file():
        raise ExportError(
            f"base model {base_model_dir} is not a model directory (no config.json): pass "
            "--base-model with the job's model directory"
        )
    if Path(out_dir).exists() and any(Path(out_dir).iterdir()):
        raise ExportError(f"{out_dir} is not empty: choose a new directory")
    merge(adapter, Path(base_model_dir), Path(out_dir))
    return checkpoint


def _step(root: Path, job_id: int, step: int | None) -> Checkpoint:
    if step is None:
        newest = latest_weights(root, job_id)
        if newest is None:
            raise ExportError(
                f"job {job_id} has no published step under {root} (COBALT_TRAINER_CHECKPOINT_DIR)"
            )
        return newest
    kept = latest_weights(root, job_id)
    directory = job_checkpoint_root(root, job_id) / f"step-{step}"
    if kept is None or not (directory / "policy").is_dir():
        raise ExportError(f"job {job_id} step {step} is not under {root} (not kept, or never run)")
    from cobalt.shared.checkpoints import read_policy_version

    version = read_policy_version(directory / "policy")
    return Checkpoint(directory, step, version if version is not None else step)
