"""The multi-process path's CPU twin: a GRPO step on 2 ranks with FSDP2 over gloo gives
the weights and metrics of the same step in one process; the whole trainer loop under
torchrun (rank 0 talking to the orchestrator, checkpoints gathered to rank 0 and scattered
back on resume) ends where one process does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.checkpoint import latest_checkpoint
from cobalt.trainer.step import Rollouts, frozen_copy, make_optimizer, train_step
from tests.trainer.test_loop import JOB, FakeOrchestrator, trainer, weights

HYPER = TrainerHyperparameters(
    lr=1e-3, weight_decay=0.0, n_samples=4, contexts_per_step=2, updates_per_step=2
)


CORRECTED = {"recompute_old_log_probs": True, "tis_cap": 1.1, "mis_threshold": 1.2}
"""Off-policy correction tight enough that the sampler's -3.9 gets tokens truncated and
masked (the tiny model's log-probs lie within 0.4 of it here)."""


def hyper(
    budget: int | None = None, compute_dtype: str = "float32", corrected: bool = False
) -> TrainerHyperparameters:
    """HYPER with a micro-batch budget (rows here have at most 3 + 7 tokens), and the
    off-policy correction `CORRECTED`."""
    values = HYPER.model_dump() | {"compute_dtype": compute_dtype}
    if budget is not None:
        values |= {"max_prompt_tokens": 3, "max_response_tokens": 7, "micro_batch_tokens": budget}
    return TrainerHyperparameters.model_validate(values | (CORRECTED if corrected else {}))


ROOT = Path(__file__).resolve().parents[2]


def tiny() -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=48, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=128,
        tie_word_embeddings=False,
    )  # fmt: skip
    return Qwen2ForCausalLM(config).float()


def rollouts() -> Rollouts:
    """Two groups of four, responses of uneven length, the sampler's logprobs near the
    policy's (so the ratio is near 1 and few tokens clip)."""
    prompts = [[5, 9, 3, 17], [22, 8]]
    responses = [[7, 7, 21, 4, 30], [11, 2], [40, 8, 8], [25, 13, 6, 6, 6, 19],
                 [1, 2, 3], [9, 9, 9, 9], [30], [12, 14, 16, 18, 20, 22, 24]]  # fmt: skip
    return Rollouts(
        prompt_ids=[prompts[i // 4] for i in range(8)],
        response_ids=responses,
        rewards=[0.2, 1.0, 0.5, 0.0, -0.1, -1.0, 0.2, 1.0],
        group_ids=[i // 4 for i in range(8)],
        old_log_probs=[[-3.9] * len(r) for r in responses],
    )


def torchrun(script: str, *arguments: object) -> None:
    """Run tests/trainer/`script` on 2 CPU ranks; fail with its stderr."""
    # The checkout first, then the caller's path (a worktree's sources before the
    # environment's editable install).
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    launcher = Path(sys.executable).parent / "torchrun"
    done = subprocess.run(
        [str(launcher), "--nproc-per-node", "2", "--standalone",
         str(ROOT / "tests" / "trainer" / script), *map(str, arguments)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("budget", [None, 10])
def test_two_ranks_on_gloo_take_the_single_process_step(tmp_path: Path, budget: int | None) -> None:
    """Unbatched on 2 ranks, and with micro-batches of 10 tokens (rank 1 needs two where
    rank 0 needs one in the second mini-batch: rank 0 runs an idle one), against one
    process taking each mini-batch in one pass."""
    torchrun("distributed_step.py", tmp_path, *([budget] if budget else []))
    distributed = torch.load(tmp_path / "weights.pt")
    report = json.loads((tmp_path / "metrics.json").read_text())
    assert report["world"] == 2
    if budget:
        assert [m["micro_batches"] for m in report["metrics"]] == [2, 2]

    policy = tiny()
    reference = frozen_copy(policy)
    single = train_step(policy, reference, make_optimizer(policy, HYPER), rollouts(), HYPER)
    assert [m["micro_batches"] for m in single] == [1, 1]
    for name, tensor in policy.state_dict().items():
        assert torch.allclose(tensor, distributed[name], atol=1e-5), name
    start = tiny().state_dict()
    assert any(not torch.equal(start[name], distributed[name]) for name in start)  # it moved
    for ours, theirs in zip(single, report["metrics"], strict=True):
        for key in ("loss", "pg_loss", "pg_clipfrac", "kl_ref", "grad_norm", "responses"):
            assert abs(ours[key] - theirs[key]) < 1e-4, (key, ours[key], theirs[key])


@pytest.mark.parametrize("budget", [None, 10])
def test_the_off_policy_correction_on_two_ranks_is_the_single_process_one(
    tmp_path: Path, budget: int | None
) -> None:
    """Each rank recomputes its own rows' old log-probs: the mismatch metrics add up over
    the ranks, and MIS's kept tokens count over both in every token-mean."""
    torchrun("distributed_step.py", tmp_path, budget or "none", "float32", "corrected")
    distributed = torch.load(tmp_path / "weights.pt")
    report = json.loads((tmp_path / "metrics.json").read_text())

    policy = tiny()
    settings = hyper(budget, corrected=True)
    single = train_step(policy, frozen_copy(policy), make_optimizer(policy, settings), rollouts(),
                        settings)  # fmt: skip
    assert single[0]["mismatch_masked_fraction"] > 0
    assert single[0]["mismatch_truncated_fraction"] > 0
    # AdamW moves a weight by about lr (1e-3) whatever the size of its gradient, so the
    # rounding of a near-zero gradient element (more of them with tokens masked) reaches
    # the weight: 5e-5 is 5 % of one update.
    for name, tensor in policy.state_dict().items():
        assert torch.allclose(tensor, distributed[name], atol=5e-5), name
    for ours, theirs in zip(single, report["metrics"], strict=True):
        for key in ("loss", "pg_loss", "kl_ref", "grad_norm", "mismatch_log_ratio_mean",
                    "mismatch_log_ratio_abs_max", "mismatch_kl_k3", "mismatch_is_weight_mean",
                    "mismatch_truncated_fraction", "mismatch_masked_fraction"):  # fmt: skip
            assert abs(ours[key] - theirs[key]) < 1e-4, (key, ours[key], theirs[key])


def test_bfloat16_on_two_ranks_runs_with_float32_master_weights(tmp_path: Path) -> None:
    """FSDP2's mixed-precision policy on gloo: computes in bfloat16, keeps float32 weights,
    and lands near the float32 step (bfloat16 rounding apart)."""
    torchrun("distributed_step.py", tmp_path, 10, "bfloat16")
    mixed = torch.load(tmp_path / "weights.pt")
    policy = tiny()
    start = {name: tensor.clone() for name, tensor in policy.state_dict().items()}
    train_step(policy, frozen_copy(policy), make_optimizer(policy, HYPER), rollouts(), HYPER)
    moved = 0
    for name, tensor in policy.state_dict().items():
        assert mixed[name].dtype == torch.float32, name
        assert torch.allclose(mixed[name], tensor, atol=5e-3), name
        moved += int(not torch.equal(mixed[name], start[name]))
    assert moved > 0


def test_the_trainer_under_torchrun_ends_where_one_process_does(
    tiny_model: Qwen2ForCausalLM, tmp_path: Path
) -> None:
    model_dir = tmp_path / "model"
    tiny_model.save_pretrained(model_dir)
    single = FakeOrchestrator(model_dir)
    trainer(single, tmp_path / "single").run(max_steps=2)

    torchrun("distributed_serve.py", model_dir, tmp_path / "two", tmp_path / "two.json", 2)
    two = json.loads((tmp_path / "two.json").read_text())
    assert two["world"] == 2 and two["last"] == 2
    # One trainer towards the orchestrator: each round started, step claimed and reported once.
    assert two["rounds"] == [1, 2] and two["claims"] == [1, 2]
    assert two["reports"] == [[1, 1], [2, 2]]
    for ours, theirs in zip(single.reports, two["metrics"], strict=True):
        assert abs(ours.metrics["loss"] - theirs["loss"]) < 1e-4

    # Killed after step 1 and resumed on 2 ranks: weights and AdamW moments scattered back.
    torchrun("distributed_serve.py", model_dir, tmp_path / "resumed", tmp_path / "r1.json", 1)
    torchrun("distributed_serve.py", model_dir, tmp_path / "resumed", tmp_path / "r2.json", 1)
    resumed = json.loads((tmp_path / "r2.json").read_text())
    assert resumed["claims"] == [2] and resumed["reports"] == [[2, 2]]

    expected = weights(checkpoint_dir(tmp_path / "single"))
    for run in ("two", "resumed"):
        got = weights(checkpoint_dir(tmp_path / run))
        for name, tensor in expected.items():
            assert torch.allclose(tensor, got[name], atol=1e-5), (run, name)
    start = weights(model_dir)
    assert any(not torch.equal(start[name], expected[name]) for name in start)


def checkpoint_dir(root: Path) -> Path:
    latest = latest_checkpoint(root, JOB)
    assert latest is not None and latest.step == 2
    return latest.policy_dir
