"""The trainer side of `bench/informative_groups.py --policy smollm2`: one process (the
trainer's environment, `.venv-trainer`) holding one policy and AdamW per configuration,
so that the configurations' steps can be interleaved with one model load each.

It reads one JSON request a line on stdin and answers one JSON line on stdout:

    {"config": "filter", "hyper": {...TrainerHyperparameters...}, "model": "/dir",
     "step": 3, "version": 12, "batch": {...StepBatch...}}
    -> {"policy": "/ckpt/job-1/step-3/policy", "metrics": {...}, "train_s": 9.1,
        "write_s": 1.2}

A step is the trainer's own: `train_step` on exactly the claimed groups (`rollouts_of`),
then the policy directory written in float32 (`CheckpointStore.save_weights`), which the
driver has vLLM load before that configuration's next round. A batch without groups trains
nothing and answers the previous policy directory.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from cobalt.shared.contracts.training import StepBatch, TrainerHyperparameters
from cobalt.trainer.checkpoint import CheckpointStore
from cobalt.trainer.loop import _pad_id, rollouts_of
from cobalt.trainer.precision import Precision, load_models
from cobalt.trainer.step import make_optimizer, train_step


@dataclass
class Learner:
    hyper: TrainerHyperparameters
    precision: Precision
    policy: torch.nn.Module
    reference: torch.nn.Module | None
    optimizer: torch.optim.Optimizer
    store: CheckpointStore
    policy_dir: str


def learner(index: int, request: dict[str, Any], root: Path) -> Learner:
    hyper = TrainerHyperparameters.model_validate(request["hyper"])
    device = torch.device("cpu")
    precision = Precision.resolve(hyper, device, sharded=False)
    model = Path(request["model"])
    torch.manual_seed(index)
    policy, reference = load_models(model, hyper, precision, device)
    store = CheckpointStore(root, index, base_model_dir=model, serve_dtype=torch.float32)
    return Learner(hyper, precision, policy, reference, make_optimizer(policy, hyper), store,
                   str(model))  # fmt: skip


def main() -> None:
    root = Path(tempfile.mkdtemp(prefix="cobalt-bench-checkpoints-"))
    learners: dict[str, Learner] = {}
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        name = request["config"]
        if name not in learners:
            learners[name] = learner(len(learners) + 1, request, root)
        state = learners[name]
        batch = StepBatch.model_validate(request["batch"])
        answer: dict[str, Any] = {"policy": state.policy_dir, "metrics": {}, "train_s": 0.0,
                                  "write_s": 0.0}  # fmt: skip
        if batch.groups:
            started = time.perf_counter()
            updates = train_step(
                state.policy, state.reference, state.optimizer, rollouts_of(batch),
                state.hyper, pad_id=_pad_id(state.policy.config), precision=state.precision,
            )  # fmt: skip
            trained = time.perf_counter()
            saved = state.store.save_weights(
                step=request["step"], policy_version=request["version"], model=state.policy
            )
            state.policy_dir = str(saved.policy_dir)
            answer.update(policy=state.policy_dir, metrics=updates[0], train_s=trained - started,
                          write_s=time.perf_counter() - trained)  # fmt: skip
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
