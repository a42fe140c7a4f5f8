"""Checks that a checkpoint directory can replace the serving weights, before vLLM sees it.

vLLM's in-place reload copies tensors into the live model layer by layer; a checkpoint
with a missing tensor, another shape or a truncated file fails half-way and leaves the
model with mixed weights. Everything that can be known from the files themselves
(config, safetensors headers, file sizes) is compared here first, so a bad checkpoint is
refused with a precise reason and the old weights never stop serving.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ARCHITECTURE_KEYS",
    "CheckpointError",
    "TensorInfo",
    "checkpoint_problems",
    "read_tensor_manifest",
]

ARCHITECTURE_KEYS = (
    "model_type",
    "architectures",
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
    "tie_word_embeddings",
)
"""config.json keys that must be equal for weights to be interchangeable."""

_FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}
_HEADER_LIMIT = 100 << 20
_MAX_PROBLEMS = 8


class CheckpointError(ValueError):
    """The directory is not a loadable checkpoint for the serving model."""


@dataclass(frozen=True, slots=True)
class TensorInfo:
    dtype: str
    shape: tuple[int, ...]


def _read_safetensors_header(path: Path) -> dict[str, TensorInfo]:
    """Tensor names, dtypes and shapes from one file, checking the data is all there."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise CheckpointError(f"{path.name}: shorter than a safetensors header")
        (header_len,) = struct.unpack("<Q", prefix)
        if header_len > min(_HEADER_LIMIT, size - 8):
            raise CheckpointError(f"{path.name}: header length {header_len} is impossible")
        try:
            header = json.loads(handle.read(header_len))
        except ValueError as exc:
            raise CheckpointError(f"{path.name}: header is not JSON ({exc})") from exc
    if not isinstance(header, dict):
        raise CheckpointError(f"{path.name}: header is not a JSON object")
    tensors: dict[str, TensorInfo] = {}
    data_end = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (_begin, end) = entry["dtype"], entry["shape"], entry["data_offsets"]
        except (TypeError, KeyError, ValueError) as exc:
            raise CheckpointError(f"{path.name}: bad header entry for {name!r}") from exc
        tensors[name] = TensorInfo(str(dtype), tuple(int(d) for d in shape))
        data_end = max(data_end, int(end))
    if 8 + header_len + data_end > size:
        raise CheckpointError(
            f"{path.name}: truncated ({size} bytes, header promises {8 + header_len + data_end})"
        )
    return tensors


def read_tensor_manifest(model_dir: Path) -> dict[str, TensorInfo]:
    """Every tensor of a checkpoint directory (all its *.safetensors files)."""
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{model_dir}: no *.safetensors files")
    manifest: dict[str, TensorInfo] = {}
    for file in files:
        for name, info in _read_safetensors_header(file).items():
            if name in manifest:
                raise CheckpointError(f"{model_dir}: tensor {name!r} appears in two files")
            manifest[name] = info
    return manifest


def _read_config(model_dir: Path) -> dict[str, object]:
    path = Path(model_dir) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CheckpointError(f"{model_dir}: no config.json") from exc
    except ValueError as exc:
        raise CheckpointError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(config, dict):
        raise CheckpointError(f"{path}: not a JSON object")
    return config


def checkpoint_problems(serving_dir: Path, candidate_dir: Path) -> list[str]:
    """Why `candidate_dir` cannot replace the weights loaded from `serving_dir` ([] if it can).

    Raises CheckpointError when the candidate is not a readable checkpoint at all.
    """
    candidate_dir = Path(candidate_dir)
    if not candidate_dir.is_dir():
        raise CheckpointError(f"{candidate_dir}: not a directory the server can read")
    serving_config, candidate_config = _read_config(serving_dir), _read_config(candidate_dir)
    problems = [
        f"config.json {key}: serving {serving_config.get(key)!r}, "
        f"checkpoint {candidate_config.get(key)!r}"
        for key in ARCHITECTURE_KEYS
        if serving_config.get(key) != candidate_config.get(key)
    ]
    serving, candidate = read_tensor_manifest(serving_dir), read_tensor_manifest(candidate_dir)
    missing = sorted(serving.keys() - candidate.keys())
    if missing:
        hint = (
            " (tied embeddings? save with tie_word_embeddings=False)"
            if any(name.endswith("lm_head.weight") for name in missing)
            else ""
        )
        problems.append(f"missing tensors{hint}: {', '.join(missing[:_MAX_PROBLEMS])}")
    extra = sorted(candidate.keys() - serving.keys())
    if extra:
        problems.append(f"unexpected tensors: {', '.join(extra[:_MAX_PROBLEMS])}")
    for name in sorted(serving.keys() & candidate.keys()):
        want, got = serving[name], candidate[name]
        if want.shape != got.shape:
            problems.append(f"{name}: shape {list(got.shape)}, serving {list(want.shape)}")
        elif got.dtype not in _FLOAT_DTYPES:
            problems.append(f"{name}: dtype {got.dtype} is not a float type")
        if len(problems) >= 2 * _MAX_PROBLEMS:
            break
    return problems
