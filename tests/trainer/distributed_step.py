"""One GRPO step under torchrun on FSDP2/gloo (run by test_distributed.py): rank 0 saves
the full weights after the step and the step's metrics.

Arguments: the output directory, then optionally the micro-batch budget (`none`: none),
the compute dtype (`float32` or `bfloat16`, the latter through FSDP2's mixed-precision
policy) and `corrected` (the off-policy correction of test_distributed.CORRECTED)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from cobalt.trainer.distributed import init_from_env, rank_and_size, shard_model
from cobalt.trainer.precision import Precision
from cobalt.trainer.step import frozen_copy, make_optimizer, train_step
from tests.trainer.test_distributed import hyper, rollouts, tiny


def main(out: Path, budget: int | None, compute_dtype: str, corrected: bool) -> None:
    assert init_from_env(torch.device("cpu"))
    settings = hyper(budget, compute_dtype, corrected)
    precision = Precision.resolve(settings, torch.device("cpu"), sharded=True)
    policy = tiny()
    reference = frozen_copy(policy).to(precision.compute_dtype)
    shard_model(policy, precision.compute_dtype)
    shard_model(reference, precision.compute_dtype)
    optimizer = make_optimizer(policy, settings)
    metrics = train_step(policy, reference, optimizer, rollouts(), settings, precision=precision)
    weights = get_model_state_dict(
        policy, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )
    rank, size = rank_and_size()
    if rank == 0:
        torch.save(weights, out / "weights.pt")
        (out / "metrics.json").write_text(json.dumps({"world": size, "metrics": metrics}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(
        Path(sys.argv[1]),
        int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2] != "none" else None,
        sys.argv[3] if len(sys.argv) > 3 else "float32",
        len(sys.argv) > 4 and sys.argv[4] == "corrected",
    )
