"""Checkpoint directories on disk for the inference pre-checks: a config.json and a
safetensors file whose header is real and whose data is zeros (no torch needed)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

CONFIG = {
    "model_type": "qwen2",
    "architectures": ["Qwen2ForCausalLM"],
    "hidden_size": 4,
    "intermediate_size": 8,
    "num_hidden_layers": 1,
    "num_attention_heads": 1,
    "num_key_value_heads": 1,
    "vocab_size": 10,
    "tie_word_embeddings": False,
}
TENSORS = {
    "model.embed_tokens.weight": ("F32", [10, 4]),
    "lm_head.weight": ("F32", [10, 4]),
    "model.layers.0.mlp.down_proj.weight": ("BF16", [4, 8]),
}
_SIZES = {"F32": 4, "BF16": 2, "I64": 8}


def write_safetensors(path: Path, tensors: dict[str, tuple[str, list[int]]]) -> None:
    header: dict[str, object] = {}
    offset = 0
    for name, (dtype, shape) in tensors.items():
        size = _SIZES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + bytes(offset))


def checkpoint(
    root: Path,
    name: str,
    *,
    config: dict[str, object] | None = None,
    tensors: dict[str, tuple[str, list[int]]] | None = None,
) -> Path:
    directory = root / name
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(config or CONFIG))
    write_safetensors(directory / "model.safetensors", tensors or TENSORS)
    return directory
