"""Trainer step time on the CPU, phase by phase: the tiny test model and SmolLM2-135M.

One synthetic step as the trainer gets it from the ledger: --groups contexts x --n
samples, prompts of --prompt-tokens and responses of --response-tokens random token ids,
rewards drawn at random, the sampler's logprobs. Timed as the trainer runs it
(`cobalt.trainer.step.train_step` with `updates_per_step` updates, then
`checkpoint.save_checkpoint`), plus the parts inside a step measured alone: the frozen
reference's forward pass, the policy's forward and backward, the AdamW update.

    .venv-trainer/bin/python bench/trainer.py [--model tiny|DIR] [--groups 4] [--n 8]
        [--prompt-tokens 256] [--response-tokens 256] [--steps 3]

DIR is a Hugging Face model directory, e.g. the SmolLM2 that `cobalt inference
prepare-model` writes to ~/.cache/cobalt/models/smollm2-135m-instruct. Prints markdown
tables; docs/benchmarks.md keeps the figures.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.checkpoint import save_checkpoint
from cobalt.trainer.step import (
    Rollouts,
    frozen_copy,
    make_optimizer,
    pack,
    response_log_probs,
    train_step,
)


def tiny_model(directory: Path) -> Path:
    """The trainer tests' model: 2-layer Qwen2, hidden 64, one head, 2,048 tokens."""
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=2048, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=1, num_key_value_heads=1, max_position_embeddings=4096,
        tie_word_embeddings=False,
    )  # fmt: skip
    Qwen2ForCausalLM(config).save_pretrained(directory)
    return directory


def synthetic_step(args: argparse.Namespace, vocab: int) -> Rollouts:
    rng = random.Random(0)
    rows = args.groups * args.n
    return Rollouts(
        prompt_ids=[[rng.randrange(vocab) for _ in range(args.prompt_tokens)]
                    for _ in range(args.groups) for _ in range(args.n)],
        response_ids=[[rng.randrange(vocab) for _ in range(args.response_tokens)]
                      for _ in range(rows)],
        rewards=[rng.choice([-1.0, -0.1, 0.0, 0.2, 1.0]) for _ in range(rows)],
        group_ids=[g for g in range(args.groups) for _ in range(args.n)],
        old_log_probs=[[-2.0] * args.response_tokens for _ in range(rows)],
    )  # fmt: skip


def timed(work: Callable[[], Any]) -> float:
    started = time.perf_counter()
    work()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny, or a model directory")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--response-tokens", type=int, default=256)
    parser.add_argument("--updates", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))

    with tempfile.TemporaryDirectory() as scratch:
        model_dir = tiny_model(Path(scratch) / "tiny") if args.model == "tiny" else Path(args.model)
        policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        reference = frozen_copy(policy)
        hyper = TrainerHyperparameters(
            n_samples=args.n, contexts_per_step=args.groups, updates_per_step=args.updates,
            lr=1e-6,
        )  # fmt: skip
        optimizer = make_optimizer(policy, hyper)
        rollouts = synthetic_step(args, policy.config.vocab_size)
        samples = args.groups * args.n
        parameters = sum(p.numel() for p in policy.parameters())

        train_step(policy, reference, optimizer, rollouts, hyper)  # warm-up (allocations)
        steps, saves, refs, policies, updates = [], [], [], [], []
        for step in range(1, args.steps + 1):
            steps.append(timed(lambda: train_step(policy, reference, optimizer, rollouts, hyper)))
            saves.append(
                timed(
                    lambda step=step: save_checkpoint(  # type: ignore[misc]
                        Path(scratch) / "ckpt", job_id=1, step=step, policy_version=step,
                        model=policy, optimizer=optimizer, base_model_dir=model_dir,
                        settings={}, keep=1,
                    )  # fmt: skip
                )
            )
            batch = pack(rollouts, pad_id=0)
            mini = batch.rows(torch.arange(samples // args.updates))

            def reference_forward() -> None:
                with torch.no_grad():
                    response_log_probs(reference, mini)

            def policy_forward_backward() -> None:
                log_probs, _ = response_log_probs(policy, mini)
                (log_probs * mini.response_mask).sum().backward()

            refs.append(timed(reference_forward))
            policies.append(timed(policy_forward_backward))
            updates.append(timed(optimizer.step))
            optimizer.zero_grad(set_to_none=True)

    step_s = statistics.median(steps)
    tokens = samples * (args.prompt_tokens + args.response_tokens)
    name = "tiny (Qwen2, hidden 64)" if args.model == "tiny" else Path(args.model).name
    print(
        f"{name}: {parameters / 1e6:,.1f} M parameters; a step of {args.groups} groups x "
        f"{args.n} samples, {args.prompt_tokens} + {args.response_tokens} tokens each, "
        f"{args.updates} updates; torch {torch.__version__}, {torch.get_num_threads()} "
        f"threads; median of {args.steps} steps.\n"
    )
    print("| phase | seconds | share of the step |")
    print("|---|---:|---:|")
    per_update = [
        ("reference forward (no grad), per update", statistics.median(refs) * args.updates),
        ("policy forward + backward, per update", statistics.median(policies) * args.updates),
        ("AdamW update, per update", statistics.median(updates) * args.updates),
    ]
    print(f"| **train_step** (all {args.updates} updates) | {step_s:.3f} | 100 % |")
    for label, seconds in per_update:
        label = label.replace("per update", f"x {args.updates}")
        print(f"| of which {label} | {seconds:.3f} | {seconds / step_s:.0%} |")
    save_s = statistics.median(saves)
    print(f"| checkpoint write (policy dir + trainer state) | {save_s:.3f} | |")
    print(
        f"\n{samples / step_s:.2f} training samples/s, {tokens / step_s:,.0f} tokens/s "
        f"(prompt + response) in train_step; {samples / (step_s + save_s):.2f} samples/s "
        "with the checkpoint."
    )


if __name__ == "__main__":
    main()
