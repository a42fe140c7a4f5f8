"""Which weights a directory holds: its kind, a digest of its files and the training job
and step recorded beside them (`WeightsIdentity`).

The inference service describes the directory it loads (once per load, `GET /v1/policy`
reports it), the trainer describes each step's checkpoint in its step report, and the
orchestrator matches the two: a run records what served it, a training job's page lists
the runs evaluated with each of its checkpoints.

The digest is a sha256 over every file of the directory except `cobalt-policy.json`
(bookkeeping: the same weights published under another version number are the same
weights), in name order: each file's name and size, then the whole file when it is at
most `WHOLE_FILE_BYTES`, else its first and last `SAMPLE_BYTES`. Why sampled rather than
the whole files: an 8B checkpoint is 16 GB, hashed in ~15-30 s of a core, and the trainer
publishes one every step (the load path would wait for it); sampling reads 2 MiB per
file whatever the model's size. It still tells steps apart: a safetensors file begins
with its header (every tensor's name, dtype, shape and offset) and the first tensor's
bytes, and an optimizer step changes nearly every tensor, while configs, tokenizers and
LoRA adapters are small and hashed whole. It is an identity, not an integrity check
(delta payloads carry their own sha256 and crc32s: `weight_delta`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from cobalt.shared.checkpoints import POLICY_FILE
from cobalt.shared.contracts.weights import WeightsIdentity

__all__ = [
    "SAMPLE_BYTES",
    "WHOLE_FILE_BYTES",
    "describe_weights",
    "policy_line",
    "same_weights",
    "weights_digest",
    "weights_kind",
    "weights_line",
]

SAMPLE_BYTES = 1 << 20
"""How much of each end of a large file the digest reads."""
WHOLE_FILE_BYTES = 8 << 20
"""Files up to this size are hashed whole (configs, tokenizers, LoRA adapters)."""

_DELTA_MANIFEST = "cobalt-delta.json"  # weight_delta.DELTA_MANIFEST (it imports this package)
_ADAPTER_CONFIG = "adapter_config.json"  # peft's


def weights_kind(directory: Path) -> Literal["full", "delta", "adapter"]:
    """A delta directory (`weight_delta`), a LoRA adapter, or a whole model."""
    directory = Path(directory)
    if (directory / _DELTA_MANIFEST).is_file():
        return "delta"
    if (directory / _ADAPTER_CONFIG).is_file():
        return "adapter"
    return "full"


def weights_digest(directory: Path) -> str:
    """The sampled sha256 of a weights directory (the module docstring says what it reads).

    Raises:
        OSError: the directory or one of its files cannot be read.
    """
    root = Path(directory)
    digest = hashlib.sha256()
    files = sorted(
        path
        for path in root.rglob("*")
        if path.is_file()
        and path.name != POLICY_FILE
        and not any(part.startswith(".") for part in path.relative_to(root).parts)
    )
    if not files:
        raise FileNotFoundError(f"{root} holds no files")
    for path in files:
        size = path.stat().st_size
        digest.update(f"{path.relative_to(root).as_posix()}\0{size}\0".encode())
        with path.open("rb") as handle:
            if size <= WHOLE_FILE_BYTES:
                digest.update(handle.read())
            else:
                digest.update(handle.read(SAMPLE_BYTES))
                handle.seek(size - SAMPLE_BYTES)
                digest.update(handle.read(SAMPLE_BYTES))
    return digest.hexdigest()


def describe_weights(directory: Path) -> WeightsIdentity:
    """A weights directory's kind, path, digest, and the job, step and version its
    `cobalt-policy.json` records (absent for a base model prepared outside a job).

    Raises:
        OSError: the directory cannot be read.
    """
    directory = Path(directory).resolve()
    recorded: dict[str, object] = {}
    try:
        raw = json.loads((directory / POLICY_FILE).read_text(encoding="utf-8"))
        recorded = raw if isinstance(raw, dict) else {}
    except (FileNotFoundError, ValueError):
        pass
    return WeightsIdentity(
        kind=weights_kind(directory),
        path=str(directory),
        digest=weights_digest(directory),
        job=_natural(recorded.get("job")),
        step=_natural(recorded.get("step")),
        version=_natural(recorded.get("version")),
    )


def _natural(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def weights_line(identity: WeightsIdentity) -> str:
    """One line that names the weights: the training job and step first when they came
    from one, then the version served as, the directory and the digest's first 12 hex."""
    parts: list[str] = []
    if identity.job is not None:
        parts.append(
            f"job {identity.job} step {identity.step if identity.step is not None else '?'}"
        )
    if identity.kind == "broadcast":
        parts.append("broadcast from the trainer")
    elif identity.kind != "full":
        parts.append(identity.kind)
    if identity.version is not None:
        parts.append(f"version {identity.version}")
    line = ", ".join(parts) or "base weights"
    if identity.path is not None:
        line += f" at {identity.path}"
    if identity.digest is not None:
        line += f" (digest {identity.digest[:12]})"
    return line


def policy_line(identity: WeightsIdentity | None) -> str:
    """`weights_line` of the policy a run recorded, or why there is none."""
    if identity is None:
        return "not reported (the endpoint is not Cobalt's inference service)"
    return weights_line(identity)


def same_weights(first: WeightsIdentity, second: WeightsIdentity) -> bool:
    """Whether two reports name the same weights: by digest when both have one, else by
    kind, directory, job and step (a broadcast has nothing else to compare)."""
    if first.digest is not None and second.digest is not None:
        return first.digest == second.digest
    keys = ("kind", "path", "job", "step")
    return all(getattr(first, key) == getattr(second, key) for key in keys)
