"""Pre-checks that keep an incompatible checkpoint away from vLLM (no vLLM needed)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from cobalt.inference.checkpoints import CheckpointError, checkpoint_problems, read_tensor_manifest
from cobalt.shared.checkpoints import POLICY_FILE, read_policy_version, write_policy_version
from tests.support.checkpoints import CONFIG, TENSORS, checkpoint


def test_an_identical_layout_has_no_problems(tmp_path: Path) -> None:
    serving, candidate = checkpoint(tmp_path, "a"), checkpoint(tmp_path, "b")
    assert checkpoint_problems(serving, candidate) == []
    manifest = read_tensor_manifest(candidate)
    assert manifest["model.layers.0.mlp.down_proj.weight"].shape == (4, 8)


def test_shape_dtype_and_name_differences_are_named(tmp_path: Path) -> None:
    serving = checkpoint(tmp_path, "serving")
    tensors = dict(TENSORS)
    tensors["model.layers.0.mlp.down_proj.weight"] = ("BF16", [4, 4])
    tensors["model.embed_tokens.weight"] = ("I64", [10, 4])
    del tensors["lm_head.weight"]
    tensors["model.extra.weight"] = ("F32", [1])
    problems = checkpoint_problems(serving, checkpoint(tmp_path, "bad", tensors=tensors))
    text = "; ".join(problems)
    assert "down_proj.weight: shape [4, 4], serving [4, 8]" in text
    assert "embed_tokens.weight: dtype I64 is not a float type" in text
    assert "missing tensors (tied embeddings? save with tie_word_embeddings=False)" in text
    assert "unexpected tensors: model.extra.weight" in text


def test_config_differences_are_named(tmp_path: Path) -> None:
    serving = checkpoint(tmp_path, "serving")
    other = checkpoint(tmp_path, "other", config={**CONFIG, "tie_word_embeddings": True})
    assert checkpoint_problems(serving, other) == [
        "config.json tie_word_embeddings: serving False, checkpoint True"
    ]


@pytest.mark.parametrize(
    ("damage", "phrase"),
    [
        (lambda d: (d / "model.safetensors").write_bytes(b"\x01\x02"), "shorter than a"),
        (
            lambda d: (d / "model.safetensors").write_bytes(
                (d / "model.safetensors").read_bytes()[:-3]
            ),
            "truncated",
        ),
        (lambda d: (d / "model.safetensors").unlink(), "no *.safetensors files"),
        (lambda d: (d / "config.json").write_text("{"), "not JSON"),
        (lambda d: (d / "config.json").unlink(), "no config.json"),
        (
            lambda d: (d / "model.safetensors").write_bytes(struct.pack("<Q", 2**40) + b"{}"),
            "impossible",
        ),
    ],
)
def test_unreadable_checkpoints_raise_a_clear_error(
    tmp_path: Path, damage: object, phrase: str
) -> None:
    serving, candidate = checkpoint(tmp_path, "serving"), checkpoint(tmp_path, "candidate")
    damage(candidate)  # type: ignore[operator]
    with pytest.raises(CheckpointError, match=phrase.replace("*", r"\*")):
        checkpoint_problems(serving, candidate)


def test_not_a_directory(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="not a directory"):
        checkpoint_problems(checkpoint(tmp_path, "serving"), tmp_path / "missing")


def test_policy_version_file_round_trips_and_rejects_nonsense(tmp_path: Path) -> None:
    assert read_policy_version(tmp_path) is None
    write_policy_version(tmp_path, 4, step=120)
    assert read_policy_version(tmp_path) == 4
    assert json.loads((tmp_path / POLICY_FILE).read_text())["step"] == 120
    for bad in ('{"version": -1}', '{"version": true}', '{"v": 1}', "[]", "nope"):
        (tmp_path / POLICY_FILE).write_text(bad)
        with pytest.raises(ValueError, match=POLICY_FILE):
            read_policy_version(tmp_path)
    with pytest.raises(ValueError):
        write_policy_version(tmp_path, -2)
