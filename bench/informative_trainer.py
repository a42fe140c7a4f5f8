"""The trainer side of `bench/informative_groups.py --policy smollm2`: one process (the
trainer's environment, `.venv-trainer`) training one policy with its own AdamW per
configuration, their steps interleaved. Only the configuration being stepped is in
memory (a policy with AdamW is ~2.2 GB for SmolLM2 in float32, and the machine is
shared): the others wait on disk as their last policy directory (float32, exact) and
their optimizer state; swapping them (`swap_s`) is timed apart from the step.

It reads one JSON request a line on stdin and answers one JSON line on stdout:

    {"config": "filter", "hyper": {...TrainerHyperparameters...}, "model": "/dir",
     "step": 3, "version": 12, "batch": {...StepBatch...}}
    -> {"policy": "/ckpt/job-1/step-3/policy", "metrics": {...}, "train_s": 9.1,
        "write_s": 1.2, "swap_s": 4.0}

A step is the trainer's own: `train_step` on exactly the claimed groups (`rollouts_of`),
then the policy directory written in float32 (`CheckpointStore.save_weights`), which the
driver has vLLM load before that configuration's next round. A batch without groups trains
nothing and answers the previous policy directory.
"""

from __future__ import annotations

import gc
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
    """One configuration's trainer: on disk (`policy_dir`, `optimizer_file`) when not
    stepped, loaded (`policy`, `optimizer`) while it is."""

    hyper: TrainerHyperparameters
    precision: Precision
    store: CheckpointStore
    policy_dir: str
    """Its newest weights (the base model before its first step)."""
    optimizer_file: Path
    policy: torch.nn.Module | None = None
    optimizer: torch.optim.Optimizer | None = None

    def load(self) -> None:
        self.policy, _ = load_models(Path(self.policy_dir), self.hyper, self.precision,
                                     torch.device("cpu"))  # fmt: skip
        self.optimizer = make_optimizer(self.policy, self.hyper)
        if self.optimizer_file.is_file():
            self.optimizer.load_state_dict(torch.load(self.optimizer_file))

    def unload(self) -> None:
        assert self.optimizer is not None
        torch.save(self.optimizer.state_dict(), self.optimizer_file)
        self.policy = self.optimizer = None
        gc.collect()


def learner(index: int, request: dict[str, Any], root: Path) -> Learner:
    hyper = TrainerHyperparameters.model_validate(request["hyper"])
    if hyper.kl_coef > 0:
        raise SystemExit("kl_coef > 0 needs a reference model; this bench trains without")
    precision = Precision.resolve(hyper, torch.device("cpu"), sharded=False)
    torch.manual_seed(index)
    model = Path(request["model"])
    store = CheckpointStore(root, index, base_model_dir=model, serve_dtype=torch.float32)
    return Learner(hyper, precision, store, str(model), root / f"optimizer-{index}.pt")


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
                                  "write_s": 0.0, "swap_s": 0.0}  # fmt: skip
        if batch.groups:
            started = time.perf_counter()
            for other in learners.values():
                if other.policy is not None and other is not state:
                    other.unload()
            if state.policy is None:
                state.load()
            assert state.policy is not None and state.optimizer is not None
            swapped = time.perf_counter()
            updates = train_step(
                state.policy, None, state.optimizer, rollouts_of(batch), state.hyper,
                pad_id=_pad_id(state.policy.config), precision=state.precision,
            )  # fmt: skip
            trained = time.perf_counter()
            saved = state.store.save_weights(
                step=request["step"], policy_version=request["version"], model=state.policy
            )
            state.policy_dir = str(saved.policy_dir)
            answer.update(policy=state.policy_dir, metrics=updates[0], swap_s=swapped - started,
                          train_s=trained - swapped,
                          write_s=time.perf_counter() - trained)  # fmt: skip
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
