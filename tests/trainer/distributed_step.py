"""One GRPO step under torchrun on FSDP2/gloo (run by test_distributed.py): rank 0 saves
the full weights after the step and the step's metrics."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

from cobalt.trainer.distributed import init_from_env, rank_and_size, shard_model
from cobalt.trainer.step import frozen_copy, make_optimizer, train_step
from tests.trainer.test_distributed import HYPER, rollouts, tiny


def main(out: Path) -> None:
    assert init_from_env(torch.device("cpu"))
    policy = tiny()
    reference = frozen_copy(policy)
    shard_model(policy)
    shard_model(reference)
    optimizer = make_optimizer(policy, HYPER)
    metrics = train_step(policy, reference, optimizer, rollouts(), HYPER)
    weights = get_model_state_dict(
        policy, options=StateDictOptions(full_state_dict=True, cpu_offload=True)
    )
    rank, size = rank_and_size()
    if rank == 0:
        torch.save(weights, out / "weights.pt")
        (out / "metrics.json").write_text(json.dumps({"world": size, "metrics": metrics}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]))
