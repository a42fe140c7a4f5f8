"""Step checkpoints (cobalt.trainer.checkpoint): complete or absent, an exact resume, the
weights every step and the resume state every `save_every` steps in the background."""

from __future__ import annotations

import errno
import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import Qwen2ForCausalLM

from cobalt.shared.checkpoints import read_policy_version
from cobalt.trainer.checkpoint import (
    STATE_FILE,
    Checkpoint,
    CheckpointStore,
    latest_checkpoint,
    latest_weights,
    load_checkpoint,
    save_checkpoint,
)
from cobalt.trainer.settings import TrainerSettings


def base_dir(tmp_path: Path, model: Qwen2ForCausalLM) -> Path:
    directory = tmp_path / "base"
    model.save_pretrained(directory)
    (directory / "tokenizer.json").write_text("{}")
    (directory / "chat_template.jinja").write_text("{{ messages }}")
    return directory


def one_update(model: Qwen2ForCausalLM, optimizer: torch.optim.Optimizer) -> None:
    loss = model(input_ids=torch.tensor([[1, 2, 3, 4]])).logits.pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def test_resume_restores_weights_optimizer_and_random_state(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    base = base_dir(tmp_path, tiny_model)
    optimizer = torch.optim.AdamW(tiny_model.parameters(), lr=1e-2)
    one_update(tiny_model, optimizer)
    root = tmp_path / "checkpoints"
    saved = save_checkpoint(
        root, job_id=3, step=1, policy_version=5, model=tiny_model, optimizer=optimizer,
        base_model_dir=base, settings={"lr": 1e-2},
    )  # fmt: skip

    assert read_policy_version(saved.policy_dir) == 5
    assert (saved.policy_dir / "tokenizer.json").is_file()
    assert (saved.policy_dir / "chat_template.jinja").is_file()
    assert (
        json.loads((saved.policy_dir / "config.json").read_text())["tie_word_embeddings"] is False
    )

    fresh = Qwen2ForCausalLM.from_pretrained(base)
    fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    latest = latest_checkpoint(root, 3)
    assert latest is not None and (latest.step, latest.policy_version) == (1, 5)
    state = load_checkpoint(latest, model=fresh, optimizer=fresh_optimizer)
    assert state["settings"] == {"lr": 1e-2}
    for (name, a), b in zip(
        tiny_model.state_dict().items(), fresh.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
    # The next update is the same on both: the optimizer's moments came back too.
    one_update(tiny_model, optimizer)
    one_update(fresh, fresh_optimizer)
    for a, b in zip(tiny_model.parameters(), fresh.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-7)


def test_random_state_is_restored(tiny_model: Qwen2ForCausalLM, tmp_path: Path) -> None:
    base = base_dir(tmp_path, tiny_model)
    optimizer = torch.optim.AdamW(tiny_model.parameters())
    root = tmp_path / "checkpoints"
    saved = save_checkpoint(
        root, job_id=1, step=1, policy_version=1, model=tiny_model, optimizer=optimizer,
        base_model_dir=base, settings={},
    )  # fmt: skip
    after_save = (torch.rand(3).tolist(), np.random.rand(), random.random())
    load_checkpoint(saved, model=tiny_model, optimizer=optimizer)
    assert (torch.rand(3).tolist(), np.random.rand(), random.random()) == after_save


def test_only_complete_checkpoints_count_and_old_ones_go(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    base = base_dir(tmp_path, tiny_model)
    optimizer = torch.optim.AdamW(tiny_model.parameters())
    root = tmp_path / "checkpoints"
    assert latest_checkpoint(root, 7) is None
    for step in (1, 2, 3):
        save_checkpoint(
            root, job_id=7, step=step, policy_version=step, model=tiny_model,
            optimizer=optimizer, base_model_dir=base, settings={}, keep=2,
        )  # fmt: skip
    job_root = root / "job-7"
    assert sorted(p.name for p in job_root.iterdir()) == ["step-2", "step-3"]
    (job_root / ".step-4.partial" / "policy").mkdir(parents=True)  # killed while writing
    (job_root / "step-5").mkdir()  # not a checkpoint: no state file
    latest = latest_checkpoint(root, 7)
    assert latest is not None and latest.step == 3
    with pytest.raises(ValueError, match="at least 2"):
        save_checkpoint(
            root, job_id=7, step=4, policy_version=4, model=tiny_model, optimizer=optimizer,
            base_model_dir=base, settings={}, keep=1,
        )  # fmt: skip


def test_served_weights_take_the_base_dtype_and_resume_keeps_full_precision(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    from safetensors.torch import load_file

    base = base_dir(tmp_path, tiny_model)
    optimizer = torch.optim.AdamW(tiny_model.parameters(), lr=1e-2)
    one_update(tiny_model, optimizer)
    saved = save_checkpoint(
        tmp_path / "c", job_id=2, step=1, policy_version=1, model=tiny_model,
        optimizer=optimizer, base_model_dir=base, settings={}, serve_dtype=torch.bfloat16,
    )  # fmt: skip
    served = load_file(saved.policy_dir / "model.safetensors")
    assert {t.dtype for t in served.values()} == {torch.bfloat16}
    assert json.loads((saved.policy_dir / "config.json").read_text())["dtype"] == "bfloat16"
    fresh = Qwen2ForCausalLM.from_pretrained(base)
    load_checkpoint(saved, model=fresh, optimizer=torch.optim.AdamW(fresh.parameters()))
    restored = fresh.state_dict()
    for name, weights in tiny_model.state_dict().items():
        assert torch.equal(weights, restored[name]), name  # float32, not rounded to bf16


def store(tmp_path: Path, base: Path, *, keep: int = 2) -> CheckpointStore:
    return CheckpointStore(tmp_path / "checkpoints", 9, base_model_dir=base, keep=keep)


def first_step_saved(
    tmp_path: Path, model: Qwen2ForCausalLM
) -> tuple[Path, torch.optim.Optimizer, CheckpointStore, Checkpoint]:
    """One update, then step 1's policy directory (version 1); the resume state is next."""
    base = base_dir(tmp_path, model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    checkpoints = store(tmp_path, base)
    one_update(model, optimizer)
    return (
        base,
        optimizer,
        checkpoints,
        checkpoints.save_weights(step=1, policy_version=1, model=model),
    )


def test_weights_every_step_a_resume_state_every_nth_and_old_steps_go(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    base = base_dir(tmp_path, tiny_model)
    optimizer = torch.optim.AdamW(tiny_model.parameters(), lr=1e-2)
    checkpoints = store(tmp_path, base)
    for step in range(1, 6):
        one_update(tiny_model, optimizer)
        saved = checkpoints.save_weights(step=step, policy_version=10 + step, model=tiny_model)
        if step % 2 == 0:
            checkpoints.save_state(saved, model=tiny_model, optimizer=optimizer, settings={})
            checkpoints.wait()
    root = tmp_path / "checkpoints"
    # The newest 2 policy directories, and the newest resume state with its step.
    assert sorted(p.name for p in (root / "job-9").iterdir()) == ["step-4", "step-5"]
    assert not (root / "job-9" / "step-5" / STATE_FILE).exists()
    state, weights = latest_checkpoint(root, 9), latest_weights(root, 9)
    assert state is not None and (state.step, state.policy_version) == (4, 14)
    assert weights is not None and (weights.step, weights.policy_version) == (5, 15)
    assert read_policy_version(weights.policy_dir) == 15


def test_a_resume_state_killed_mid_write_leaves_the_previous_one_usable(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    base, optimizer, checkpoints, saved = first_step_saved(tmp_path, tiny_model)
    checkpoints.save_state(saved, model=tiny_model, optimizer=optimizer, settings={})
    checkpoints.wait()
    at_step_1 = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    for step in (2, 3, 4):
        one_update(tiny_model, optimizer)
        checkpoints.save_weights(step=step, policy_version=step, model=tiny_model)
    job_root = tmp_path / "checkpoints" / "job-9"
    (job_root / "step-4" / f".{STATE_FILE}.partial").write_bytes(b"half a pickle")
    latest = latest_checkpoint(tmp_path / "checkpoints", 9)
    assert latest is not None and latest.step == 1  # kept beyond the newest 2 directories
    assert sorted(p.name for p in job_root.iterdir()) == ["step-1", "step-3", "step-4"]
    fresh = Qwen2ForCausalLM.from_pretrained(base)
    load_checkpoint(latest, model=fresh, optimizer=torch.optim.AdamW(fresh.parameters()))
    for name, tensor in fresh.state_dict().items():
        assert torch.equal(tensor, at_step_1[name]), name


def test_training_goes_on_while_the_resume_state_is_written(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    """The state written is the step's, not what the next updates make of the live tensors."""
    base, optimizer, checkpoints, saved = first_step_saved(tmp_path, tiny_model)
    weights = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    moments = [optimizer.state[p]["exp_avg"].clone() for p in tiny_model.parameters()]
    checkpoints.save_state(saved, model=tiny_model, optimizer=optimizer, settings={})
    for _ in range(3):  # the next steps, before the write is waited for
        one_update(tiny_model, optimizer)
    checkpoints.wait()
    fresh = Qwen2ForCausalLM.from_pretrained(base)
    fresh_optimizer = torch.optim.AdamW(fresh.parameters(), lr=1e-2)
    load_checkpoint(saved, model=fresh, optimizer=fresh_optimizer)
    for name, tensor in fresh.state_dict().items():
        assert torch.equal(tensor, weights[name]), name
    for parameter, moment in zip(fresh.parameters(), moments, strict=True):
        assert torch.equal(fresh_optimizer.state[parameter]["exp_avg"], moment)


def test_a_failed_resume_state_write_is_raised_by_the_next_wait(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, optimizer, checkpoints, saved = first_step_saved(tmp_path, tiny_model)

    def disk_broken(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    # Settings are stored as plain data, so nothing in them can fail the write any more;
    # the disk can. (A full or read-only volume is waited out instead: test_volume.py.)
    monkeypatch.setattr(torch, "save", disk_broken)
    checkpoints.save_state(saved, model=tiny_model, optimizer=optimizer, settings={})
    with pytest.raises(RuntimeError, match="writing a resume state failed"):
        checkpoints.wait()
    assert latest_checkpoint(tmp_path / "checkpoints", 9) is None
    checkpoints.wait()  # reported once


def test_a_replayed_step_keeps_the_weights_published_under_its_version(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    base = base_dir(tmp_path, tiny_model)
    checkpoints = store(tmp_path, base)
    first = checkpoints.save_weights(step=1, policy_version=3, model=tiny_model)
    written = (first.policy_dir / "model.safetensors").stat().st_mtime_ns
    with torch.no_grad():
        next(tiny_model.parameters()).add_(1.0)
    again = checkpoints.save_weights(step=1, policy_version=3, model=tiny_model)
    assert (again.policy_dir / "model.safetensors").stat().st_mtime_ns == written
    other = checkpoints.save_weights(step=1, policy_version=7, model=tiny_model)  # started over
    assert read_policy_version(other.policy_dir) == 7
    assert not list((tmp_path / "checkpoints" / "job-9").glob(".step-*"))


@pytest.mark.parametrize("every", [0, -1, -(2**63)])
def test_a_cadence_below_one_is_refused_with_the_setting_to_change(every: int) -> None:
    with pytest.raises(ValueError, match="COBALT_TRAINER_SAVE_EVERY to a whole number"):
        TrainerSettings(save_every=every)


@pytest.mark.parametrize("every", [1, 2, 10_000])
def test_a_positive_cadence_is_taken(every: int) -> None:
    assert TrainerSettings(save_every=every).save_every == every


def test_consecutive_resume_states_reuse_one_copy_without_mixing_steps(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    base, optimizer, checkpoints, first = first_step_saved(tmp_path, tiny_model)
    expected = {1: {k: v.clone() for k, v in tiny_model.state_dict().items()}}
    checkpoints.save_state(first, model=tiny_model, optimizer=optimizer, settings={})
    one_update(tiny_model, optimizer)  # while step 1's state is written
    second = checkpoints.save_weights(step=2, policy_version=2, model=tiny_model)
    expected[2] = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    checkpoints.save_state(second, model=tiny_model, optimizer=optimizer, settings={})
    checkpoints.wait()
    for saved in (first, second):
        fresh = Qwen2ForCausalLM.from_pretrained(base)
        load_checkpoint(saved, model=fresh, optimizer=torch.optim.AdamW(fresh.parameters()))
        for name, tensor in fresh.state_dict().items():
            assert torch.equal(tensor, expected[saved.step][name]), (saved.step, name)
