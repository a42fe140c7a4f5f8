"""The multi-process path's CPU twin: a GRPO step on 2 ranks with FSDP2 over gloo gives
the weights and metrics of the same step in one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.step import Rollouts, frozen_copy, make_optimizer, train_step

HYPER = TrainerHyperparameters(
    lr=1e-3, weight_decay=0.0, n_samples=4, contexts_per_step=2, updates_per_step=2
)
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


def test_two_ranks_on_gloo_take_the_single_process_step(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    torchrun = Path(sys.executable).parent / "torchrun"
    done = subprocess.run(
        [str(torchrun), "--nproc-per-node", "2", "--standalone",
         str(ROOT / "tests" / "trainer" / "distributed_step.py"), str(tmp_path)],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    distributed = torch.load(tmp_path / "weights.pt")
    report = json.loads((tmp_path / "metrics.json").read_text())
    assert report["world"] == 2

    policy = tiny()
    reference = frozen_copy(policy)
    single = train_step(policy, reference, make_optimizer(policy, HYPER), rollouts(), HYPER)
    for name, weights in policy.state_dict().items():
        assert torch.allclose(weights, distributed[name], atol=1e-5), name
    start = tiny().state_dict()
    assert any(not torch.equal(start[name], distributed[name]) for name in start)  # it moved
    for ours, theirs in zip(single, report["metrics"], strict=True):
        for key in ("loss", "pg_loss", "pg_clipfrac", "kl_ref", "grad_norm", "responses"):
            assert abs(ours[key] - theirs[key]) < 1e-4, (key, ours[key], theirs[key])
