"""Step checkpoints (cobalt.trainer.checkpoint): complete or absent, and an exact resume."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import Qwen2ForCausalLM

from cobalt.shared.checkpoints import read_policy_version
from cobalt.trainer.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint


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
