"""The policy checkpoint format shared by the trainer (writer) and inference (reader).

A checkpoint is a Hugging Face model directory (config.json, *.safetensors, tokenizer
files) plus `cobalt-policy.json`, which records the policy version the weights belong to.
Input and output embeddings must be untied: vLLM's in-place reload does not propagate a
reloaded `embed_tokens` into a tied `lm_head` (ARCHITECTURE.md, Environments).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["POLICY_FILE", "read_policy_version", "write_policy_version"]

POLICY_FILE = "cobalt-policy.json"
"""`{"version": int, ...}` beside the weights. A server started on the directory reports
this version; a weight load without an explicit version takes it."""


def read_policy_version(model_dir: Path) -> int | None:
    """The policy version recorded in a checkpoint directory, or None if it has none."""
    path = Path(model_dir) / POLICY_FILE
    if not path.is_file():
        return None
    try:
        version = json.loads(path.read_text(encoding="utf-8"))["version"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a policy file ({exc!r})") from exc
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(f"{path}: version must be a non-negative integer, got {version!r}")
    return version


def write_policy_version(model_dir: Path, version: int, **facts: Any) -> None:
    """Record `version` (and facts such as the training step) in a checkpoint directory."""
    if version < 0:
        raise ValueError(f"policy version must be >= 0, got {version}")
    (Path(model_dir) / POLICY_FILE).write_text(
        json.dumps({"version": version, **facts}, indent=2) + "\n", encoding="utf-8"
    )
