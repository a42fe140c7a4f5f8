"""LoRA helpers the inference tests run in the trainer environment's interpreter (peft).

    python lora_tools.py adapter MODEL_DIR ROOT VERSION SEED IDS K
        one GRPO step of a rank-8 LoRA job on seeded random rollouts (cobalt.trainer),
        the adapter written as the trainer publishes it (ROOT/job-1/step-VERSION/policy),
        and the trainer's top-K next-token logprobs after IDS with base + adapter

    python lora_tools.py logprobs ADAPTER_DIR IDS K
        top-K next-token logprobs after IDS of the adapter's base model + the adapter
        (peft), the base named by the adapter's config

Prints JSON: {"policy_dir", "ids", "logprobs"} (logprobs: {"ids", "logprobs"}).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path


def adapter(
    model_dir: Path, root: Path, version: int, seed: int, probe: list[int], k: int
) -> dict[str, object]:
    import torch

    from cobalt.shared.contracts.training import TrainerHyperparameters
    from cobalt.trainer.checkpoint import CheckpointStore
    from cobalt.trainer.precision import Precision, load_models
    from cobalt.trainer.step import Rollouts, make_optimizer, train_step

    torch.manual_seed(seed)
    settings = TrainerHyperparameters(
        lora_rank=8, lr=5e-2, kl_coef=1e-3, n_samples=2, contexts_per_step=2,
        updates_per_step=1,
    )  # fmt: skip
    policy, reference = load_models(model_dir, settings, Precision(), torch.device("cpu"))
    rng = random.Random(seed)
    rollouts = Rollouts(
        prompt_ids=[[rng.randrange(1, 500) for _ in range(6)] for _ in range(4)],
        response_ids=[[rng.randrange(1, 500) for _ in range(5)] for _ in range(4)],
        rewards=[1.0, 0.0, 0.8, -0.1],
        group_ids=[0, 0, 1, 1],
    )
    optimizer = make_optimizer(policy, settings)
    for _ in range(3):  # a visible change of the logprobs
        train_step(policy, reference, optimizer, rollouts, settings)
    store = CheckpointStore(root, 1, base_model_dir=model_dir)
    saved = store.save_weights(step=version, policy_version=version, model=policy)
    policy.eval()
    with torch.no_grad():
        logits = policy(input_ids=torch.tensor([probe])).logits[0, -1].float()
    values, ids = torch.log_softmax(logits, dim=-1).topk(k)
    return {"policy_dir": str(saved.policy_dir), "ids": ids.tolist(), "logprobs": values.tolist()}


def logprobs(adapter_dir: Path, probe: list[int], k: int) -> dict[str, object]:
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    config = json.loads((adapter_dir / "adapter_config.json").read_text())
    base = AutoModelForCausalLM.from_pretrained(
        config["base_model_name_or_path"], dtype=torch.float32
    )
    model = PeftModel.from_pretrained(base, adapter_dir).eval()
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([probe])).logits[0, -1].float()
    values, ids = torch.log_softmax(logits, dim=-1).topk(k)
    return {"ids": ids.tolist(), "logprobs": values.tolist()}


def main(argv: list[str]) -> None:
    command, *args = argv
    if command == "logprobs":
        adapter_dir, probe, k = args
        print(json.dumps(logprobs(Path(adapter_dir), json.loads(probe), int(k))))
        return
    if command != "adapter":
        raise SystemExit(f"unknown command {command}")
    model_dir, root, version, seed, probe, k = args
    result = adapter(
        Path(model_dir), Path(root), int(version), int(seed), json.loads(probe), int(k)
    )
    print(json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1:])
