"""Delta weight sync on the disk path (COBALT_TRAINER_FULL_WEIGHTS_EVERY): the trainer's
deltas rebuild, byte for byte, the weights it would have written whole; a missing or
corrupted delta is refused and leaves the weights as they were.
tests/inference/test_weight_delta.py loads such chains into a real vLLM server."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from transformers import Qwen2ForCausalLM

from cobalt.shared.errors import InvalidInput
from cobalt.shared.weight_delta import (
    DELTA_FILE,
    DeltaError,
    apply_delta,
    is_delta_dir,
    newest_policy,
    read_delta_manifest,
    read_full_weights,
)
from cobalt.trainer.checkpoint import CheckpointStore
from cobalt.trainer.publish import DiskPublisher
from cobalt.trainer.replicas import InferenceReplicas


def rebuilt(job_root: Path, version: int) -> dict[str, torch.Tensor]:
    chain = newest_policy(job_root, upto=version)
    assert chain.version == version
    tensors = read_full_weights(chain.full_dir)
    current = chain.full_version
    for delta in chain.deltas:
        current = apply_delta(tensors, delta, base_version=current).version
    return tensors


def same_bytes(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(
        torch.equal(a[k].view(torch.uint8), b[k].view(torch.uint8)) for k in a
    )


@pytest.fixture
def trained(tiny_model: Qwen2ForCausalLM, tmp_path: Path) -> tuple[Path, Path]:
    """Six AdamW steps of the tiny model published twice: whole every step (reference)
    and with deltas, full every 4 versions; served in bfloat16, as a real model is."""
    base = tmp_path / "base"
    tiny_model.save_pretrained(base)
    whole = CheckpointStore(tmp_path / "whole", 1, base_model_dir=base, keep=10,
                            serve_dtype=torch.bfloat16)  # fmt: skip
    delta = CheckpointStore(tmp_path / "delta", 1, base_model_dir=base, keep=2,
                            serve_dtype=torch.bfloat16, full_weights_every=4)  # fmt: skip
    optimizer = torch.optim.AdamW(tiny_model.parameters(), lr=1e-3)
    for step in range(1, 7):
        loss = tiny_model(input_ids=torch.tensor([[1, 2, 3, 4]])).logits.pow(2).mean()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        reference = whole.save_weights(step=step, policy_version=10 + step, model=tiny_model)
        saved = delta.save_weights(step=step, policy_version=10 + step, model=tiny_model)
        assert is_delta_dir(saved.policy_dir) == (step not in (1, 5))
        # Byte-identical to the full checkpoint of the same step, at every step.
        assert same_bytes(
            rebuilt(delta.job_root, 10 + step), read_full_weights(reference.policy_dir)
        )
    return whole.job_root, delta.job_root


def test_deltas_rebuild_the_full_checkpoints_byte_for_byte(trained: tuple[Path, Path]) -> None:
    _, job = trained
    # keep=2, but the steps from the newest full checkpoint (step 5) on are all kept,
    # and nothing older is needed.
    assert sorted(p.name for p in job.glob("step-*")) == ["step-5", "step-6"]
    # The manifest counts the values that changed between the two versions.
    manifest = read_delta_manifest(job / "step-6" / "policy")
    before, after = rebuilt(job, 15), rebuilt(job, 16)
    changed = sum(
        int((before[k].view(torch.int16) != after[k].view(torch.int16)).sum()) for k in after
    )
    assert manifest.changed == changed > 0


def test_a_corrupted_delta_is_refused_and_leaves_the_weights_unchanged(
    trained: tuple[Path, Path],
) -> None:
    whole, job = trained
    tensors = read_full_weights(job / "step-5" / "policy")
    before = {k: t.clone() for k, t in tensors.items()}
    payload = job / "step-6" / "policy" / DELTA_FILE
    data = bytearray(payload.read_bytes())
    data[-5] ^= 0x01
    payload.write_bytes(bytes(data))
    with pytest.raises(DeltaError, match="checksum mismatch"):
        apply_delta(tensors, payload.parent, base_version=15)
    assert same_bytes(tensors, before)


def test_a_delta_applied_to_other_weights_is_refused_and_undone(
    trained: tuple[Path, Path],
) -> None:
    whole, job = trained
    other = read_full_weights(whole / "step-4" / "policy")  # not version 15
    before = {k: t.clone() for k, t in other.items()}
    with pytest.raises(DeltaError, match="checksum mismatch.*differ from the trainer's"):
        apply_delta(other, job / "step-6" / "policy", base_version=15)
    assert same_bytes(other, before)
    with pytest.raises(DeltaError, match=r"gap: the delta of version 16 .*applies to version 15"):
        apply_delta(other, job / "step-6" / "policy", base_version=14)


def test_a_missing_delta_is_a_gap(tiny_model: Qwen2ForCausalLM, tmp_path: Path) -> None:
    base = tmp_path / "base"
    tiny_model.save_pretrained(base)
    store = CheckpointStore(tmp_path / "ckpt", 1, base_model_dir=base, keep=2,
                            serve_dtype=torch.bfloat16, full_weights_every=10)  # fmt: skip
    for step in range(1, 4):
        with torch.no_grad():
            for p in tiny_model.parameters():
                p.add_(torch.randn_like(p) * 0.01)
        store.save_weights(step=step, policy_version=step, model=tiny_model)
    assert newest_policy(store.job_root).version == 3
    shutil.rmtree(store.job_root / "step-2")
    with pytest.raises(DeltaError, match=r"gap.*version 3 applies to version 2.*ends at version 1"):
        newest_policy(store.job_root)


def test_a_refused_delta_is_written_again_whole(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    """What the publisher does when the server refuses a delta: the same version, whole,
    with the same bytes as the delta rebuilds to."""
    base = tmp_path / "base"
    tiny_model.save_pretrained(base)
    store = CheckpointStore(tmp_path / "ckpt", 1, base_model_dir=base, keep=2,
                            serve_dtype=torch.bfloat16, full_weights_every=10)  # fmt: skip
    store.save_weights(step=1, policy_version=1, model=tiny_model)
    with torch.no_grad():
        for p in tiny_model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    saved = store.save_weights(step=2, policy_version=2, model=tiny_model)
    expected = rebuilt(store.job_root, 2)
    store.rewrite_full(saved, tiny_model)
    assert not is_delta_dir(saved.policy_dir)
    assert same_bytes(read_full_weights(saved.policy_dir), expected)
    assert (saved.policy_dir / "config.json").is_file()
    # The chain now starts there: the next delta is made against it.
    with torch.no_grad():
        for p in tiny_model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    store.save_weights(step=3, policy_version=3, model=tiny_model)
    chain = newest_policy(store.job_root)
    assert (chain.full_version, chain.version) == (2, 3)


class RefusingInference:
    """Stands in for the inference client: refuses a delta directory as the server does
    when it cannot rebuild the chain (422), loads a full one."""

    def __init__(self) -> None:
        self.loaded: list[tuple[str, int | None]] = []
        self.version = 0
        self.base_url = "http://inference.invalid"

    def status(self) -> Any:
        return SimpleNamespace(version=self.version)

    def load_weights(self, path: str, *, version: int | None = None) -> Any:
        if is_delta_dir(Path(path)):
            raise InvalidInput("delta refused: checksum mismatch; still serving version 1")
        self.loaded.append((path, version))
        self.version = version or 0
        return SimpleNamespace(version=self.version)


def test_the_publisher_writes_a_refused_delta_again_whole(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    base = tmp_path / "base"
    tiny_model.save_pretrained(base)
    store = CheckpointStore(tmp_path / "ckpt", 1, base_model_dir=base, keep=2,
                            serve_dtype=torch.bfloat16, full_weights_every=10)  # fmt: skip
    inference = RefusingInference()
    publisher = DiskPublisher(store, tiny_model, InferenceReplicas.of(inference))  # type: ignore[arg-type]
    publisher.send(publisher.write(step=1, policy_version=1, full_save=False))
    with torch.no_grad():
        for p in tiny_model.parameters():
            p.add_(torch.randn_like(p) * 0.01)
    saved = publisher.write(step=2, policy_version=2, full_save=False)
    assert is_delta_dir(saved.policy_dir)
    expected = rebuilt(store.job_root, 2)
    publisher.send(saved)
    assert inference.loaded[-1] == (str(saved.policy_dir), 2)
    assert not is_delta_dir(saved.policy_dir)
    assert same_bytes(read_full_weights(saved.policy_dir), expected)
