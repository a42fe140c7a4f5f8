"""The policy checkpoint format shared by the trainer (writer) and inference (reader).

A checkpoint is a Hugging Face model directory (config.json, *.safetensors, tokenizer
files) plus `cobalt-policy.json`, which records the policy version the weights belong to.
Input and output embeddings must be untied: vLLM's in-place reload does not propagate a
reloaded `embed_tokens` into a tied `lm_head` (ARCHITECTURE.md, Environments).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "POLICY_FILE",
    "PUBLISHED_FILE",
    "PublishedPolicy",
    "read_policy_version",
    "read_published",
    "write_policy_version",
    "write_published",
]

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


PUBLISHED_FILE = "published.json"
"""At the checkpoint root: the newest policy the trainer published to its replicas. A
replica that starts or falls behind loads it before it answers ready
(`cobalt.inference.follow`)."""


@dataclass(frozen=True, slots=True)
class PublishedPolicy:
    """What `published.json` says: the job, its newest published version, and the policy
    directory of that version (as the trainer wrote it; the replicas mount the same path)."""

    job: int
    version: int
    step: int
    path: str


def write_published(checkpoint_root: Path, published: PublishedPolicy) -> None:
    """Replace `published.json` atomically (a reader sees the old file or the new one)."""
    root = Path(checkpoint_root)
    root.mkdir(parents=True, exist_ok=True)
    partial = root / f".{PUBLISHED_FILE}.partial"
    partial.write_text(json.dumps(asdict(published), indent=2) + "\n", encoding="utf-8")
    os.replace(partial, root / PUBLISHED_FILE)


def read_published(checkpoint_root: Path) -> PublishedPolicy | None:
    """The newest published policy under `checkpoint_root`, or None before any publish.

    Raises:
        ValueError: the file is there but is not a published-policy record.
    """
    path = Path(checkpoint_root) / PUBLISHED_FILE
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        published = PublishedPolicy(
            job=int(raw["job"]),
            version=int(raw["version"]),
            step=int(raw["step"]),
            path=str(raw["path"]),
        )
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a published-policy record ({exc!r})") from exc
    if published.version < 0:
        raise ValueError(f"{path}: version must be >= 0, got {published.version}")
    return published
