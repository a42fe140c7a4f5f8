"""The trainer loop under torchrun on FSDP2/gloo (run by test_distributed.py).

Every rank builds the in-memory orchestrator of test_loop.py, but only rank 0's is ever
asked (the loop's `on_rank_zero`); rank 0 writes down what it was asked and told.
Arguments: the model directory, the checkpoint root, the output file, the steps to run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch.distributed as dist

from cobalt.trainer.distributed import rank_and_size
from tests.trainer.test_loop import FakeOrchestrator, trainer


def main(model_dir: Path, checkpoints: Path, out: Path, steps: int) -> None:
    fake = FakeOrchestrator(model_dir)
    last = trainer(fake, checkpoints).run(max_steps=steps)
    rank, size = rank_and_size()
    if rank == 0:
        out.write_text(
            json.dumps(
                {
                    "world": size,
                    "last": last,
                    "rounds": fake.rounds,
                    "claims": fake.claims,
                    "reports": [[r.step, r.policy_version] for r in fake.reports],
                    "metrics": [r.metrics for r in fake.reports],
                }
            )
        )
    else:  # the other ranks never talked to the orchestrator
        assert fake.rounds == fake.claims == fake.reports == [], (rank, fake.claims)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4]))
