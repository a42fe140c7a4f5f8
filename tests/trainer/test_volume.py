"""A checkpoint volume that refuses writes (cobalt.trainer.volume): each writer's refusal
is told from a bug, the trainer's writes wait a full or read-only volume out and land once
it is fixed, and past `outage_s` they fail naming the volume and leaving nothing partial.

The volumes are real: a tmpfs of a few megabytes mounted under tmp_path
(tests/support/volumes.py), full or remounted read-only by the kernel's rules."""

from __future__ import annotations

import errno
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from transformers import Qwen2ForCausalLM

from cobalt.shared.checkpoints import write_policy_version
from cobalt.trainer.checkpoint import CheckpointStore, latest_checkpoint, latest_weights
from cobalt.trainer.volume import CheckpointVolumeError, volume_refusal, write_patiently
from tests.support.volumes import SmallVolume, small_volume
from tests.trainer.test_checkpoint import base_dir

MIB = 1024 * 1024
FAULTS = {
    "full": (SmallVolume.fill, SmallVolume.free, os.strerror(errno.ENOSPC)),
    "read-only": (SmallVolume.read_only, SmallVolume.writable, os.strerror(errno.EROFS)),
}


def leftovers(directory: Path) -> list[str]:
    """Partial output a failed write left behind (hidden names: `.step-*`, `.*.partial`)."""
    return sorted(p.name for p in directory.rglob(".*") if p.name != ".filler")


@pytest.mark.parametrize("fault", list(FAULTS))
def test_each_writer_s_refusal_is_told_as_the_volume_s(
    fault: str, tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    break_volume, _, reason = FAULTS[fault]
    with small_volume(tmp_path / "volume", 2 * MIB) as volume:
        break_volume(volume)
        writers: dict[str, Callable[[], object]] = {
            # torch.save's own error says only "file write failed": the probe tells why
            "torch.save": lambda: torch.save({"w": torch.zeros(MIB)}, volume.path / "state.pt"),
            "safetensors": lambda: tiny_model.save_pretrained(volume.path / "policy"),
            "json": lambda: write_policy_version(volume.path, 3),
        }
        for name, write in writers.items():
            with pytest.raises(Exception) as raised:
                write()
            assert volume_refusal(raised.value, volume.path) == reason, name


def test_an_error_that_is_not_the_volume_s_is_raised_at_once(tmp_path: Path) -> None:
    calls: list[int] = []

    def write() -> None:
        calls.append(1)
        raise ValueError("a bug in the writer")

    assert volume_refusal(ValueError("a bug in the writer"), tmp_path) is None
    with pytest.raises(ValueError, match="a bug"):
        write_patiently(write, directory=tmp_path, outage_s=60, what="x", clean_up=lambda: None)
    assert calls == [1]


@pytest.mark.parametrize("fault", list(FAULTS))
def test_the_weights_wait_the_fault_out_and_land_once_it_is_fixed(
    fault: str, tiny_model: Qwen2ForCausalLM, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    break_volume, fix_volume, reason = FAULTS[fault]
    base = base_dir(tmp_path, tiny_model)
    with small_volume(tmp_path / "volume", 4 * MIB) as volume:
        store = CheckpointStore(volume.path, 1, base_model_dir=base, outage_s=60)
        store.save_weights(step=1, policy_version=1, model=tiny_model)
        break_volume(volume)
        threading.Timer(1.5, fix_volume, args=(volume,)).start()
        with caplog.at_level(logging.WARNING, logger="cobalt.trainer.volume"):
            saved = store.save_weights(step=2, policy_version=2, model=tiny_model)
        assert f"refuses step 2's weights ({reason}); trying again" in caplog.text
        assert (saved.step, saved.policy_version) == (2, 2)
        newest = latest_weights(volume.path, 1)
        assert newest is not None and newest.step == 2
        assert (saved.policy_dir / "model.safetensors").is_file()
        assert leftovers(volume.path) == []


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_fault_longer_than_the_outage_fails_naming_the_volume_and_leaves_nothing_partial(
    fault: str, tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    break_volume, fix_volume, reason = FAULTS[fault]
    base = base_dir(tmp_path, tiny_model)
    with small_volume(tmp_path / "volume", 4 * MIB) as volume:
        store = CheckpointStore(volume.path, 1, base_model_dir=base, outage_s=1)
        store.save_weights(step=1, policy_version=1, model=tiny_model)
        break_volume(volume)
        with pytest.raises(CheckpointVolumeError) as raised:
            store.save_weights(step=2, policy_version=2, model=tiny_model)
        message = str(raised.value)
        assert str(store.job_root) in message and reason in message
        assert "step 2's weights" in message and "start the trainer again" in message
        fix_volume(volume)
        newest = latest_weights(volume.path, 1)
        assert newest is not None and newest.step == 1  # the step before is intact
        assert leftovers(volume.path) == []


def test_a_resume_state_refused_for_too_long_fails_and_the_previous_one_stays_usable(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    base = base_dir(tmp_path, tiny_model)
    optimizer = torch.optim.AdamW(tiny_model.parameters(), lr=1e-2)
    with small_volume(tmp_path / "volume", 4 * MIB) as volume:
        store = CheckpointStore(volume.path, 1, base_model_dir=base, outage_s=1)
        first = store.save_weights(step=1, policy_version=1, model=tiny_model)
        store.save_state(first, model=tiny_model, optimizer=optimizer, settings={})
        store.wait()
        second = store.save_weights(step=2, policy_version=2, model=tiny_model)
        volume.read_only()
        store.save_state(second, model=tiny_model, optimizer=optimizer, settings={})
        with pytest.raises(CheckpointVolumeError, match="Read-only file system"):
            store.wait()  # the background write's error, as it is (not wrapped)
        volume.writable()
        resume = latest_checkpoint(volume.path, 1)
        assert resume is not None and resume.step == 1
        store.save_state(second, model=tiny_model, optimizer=optimizer, settings={})
        store.wait()
        resume = latest_checkpoint(volume.path, 1)
        assert resume is not None and resume.step == 2
        assert leftovers(volume.path) == []
