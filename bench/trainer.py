"""Trainer step time on the CPU, phase by phase: the tiny test model and SmolLM2-135M.

One synthetic step as the trainer gets it from the ledger: --groups contexts x --n
samples, prompts of --prompt-tokens and responses of --response-tokens random token ids,
rewards drawn at random, the sampler's logprobs. Timed as the trainer runs it
(`cobalt.trainer.step.train_step` with `updates_per_step` updates, then
`checkpoint.save_checkpoint`), plus the parts inside a step measured alone: the frozen
reference's forward pass, the policy's forward and backward, the AdamW update.

With --trl, TRL's `GRPOTrainer` trains on the same step in the same process, side by
side: the same model, batch (groups x n, `updates` optimizer updates per generation
batch: `steps_per_generation`), lengths and the paper's loss settings (beta 1e-4, clip
0.2/0.4, two-sided clip 3, token-level loss). Generation is taken out of both: TRL gets
the step's token ids from a `rollout_func`, as Cobalt's trainer gets them from the ledger.
Reported: training samples per second of each and the ratio (target >= 1.0).

    .venv-trainer/bin/python bench/trainer.py [--model tiny|DIR] [--groups 4] [--n 8]
        [--prompt-tokens 256] [--response-tokens 256] [--steps 3] [--trl]

--trl needs `pip install trl==1.16.0` in .venv-trainer (`make bench-trainer` does it).

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
    """The trainer tests' model: 2-layer Qwen2, hidden 64, one head, 2,048 tokens, with a
    byte-level BPE trained here (TRL decodes completions with it)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    words = "def solve(n): return sum(range(n)) if n > 0 else print(input()) ".split()
    bpe.train_from_iterator(
        [" ".join(random.Random(i).choices(words, k=64)) for i in range(200)],
        trainers.BpeTrainer(vocab_size=2048, special_tokens=["<|endoftext|>"],
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )  # fmt: skip
    PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>").save_pretrained(
        directory
    )
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


def trl_seconds_per_update(
    model_dir: Path, rollouts: Rollouts, args: argparse.Namespace, scratch: Path
) -> list[float]:
    """TRL GRPOTrainer on the same step: seconds of each optimizer update after the first
    generation batch (set-up and the first batch's allocations excluded)."""
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    samples = len(rollouts.rewards)
    cursor = {"next": 0}

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        rows = [(cursor["next"] + i) % samples for i in range(len(prompts))]
        cursor["next"] += len(prompts)
        return {
            "prompt_ids": [list(rollouts.prompt_ids[r]) for r in rows],
            "completion_ids": [list(rollouts.response_ids[r]) for r in rows],
            "logprobs": [list((rollouts.old_log_probs or [])[r]) for r in rows],
        }

    rewards = iter(list(rollouts.rewards) * (args.steps + 2) * args.updates)

    def reward(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        return [next(rewards) for _ in completions]

    stamps: list[float] = []

    class Stamp(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, *_: Any, **__: Any) -> None:
            stamps.append(time.perf_counter())

    config = GRPOConfig(
        output_dir=str(scratch / "trl"), per_device_train_batch_size=samples // args.updates,
        gradient_accumulation_steps=1, steps_per_generation=args.updates,
        num_generations=args.n, max_completion_length=args.response_tokens,
        learning_rate=1e-6, weight_decay=0.01, max_grad_norm=1.0, beta=1e-4, epsilon=0.2,
        epsilon_high=0.4, delta=3.0, loss_type="dapo", num_iterations=1,
        max_steps=(args.steps + 1) * args.updates, use_cpu=True, bf16=False,
        report_to=[], save_strategy="no", logging_steps=10_000, disable_tqdm=True, seed=0,
        dataloader_num_workers=0,
    )  # fmt: skip
    dataset = Dataset.from_list([{"prompt": f"problem {i}"} for i in range(args.groups * 64)])
    trainer = GRPOTrainer(
        model=str(model_dir),
        reward_funcs=reward,
        args=config,
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        rollout_func=rollout_func,
        callbacks=[Stamp()],
    )
    trainer.train()
    per_update = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    return per_update[args.updates - 1 :]  # after the first generation batch


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
    parser.add_argument("--trl", action="store_true", help="also TRL's GRPOTrainer, side by side")
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

        mini = pack(rollouts, pad_id=0).rows(torch.arange(samples // args.updates))

        def reference_forward() -> None:
            with torch.no_grad():
                response_log_probs(reference, mini)

        def policy_forward_backward() -> None:
            log_probs, _ = response_log_probs(policy, mini)
            (log_probs * mini.response_mask).sum().backward()

        def checkpoint(step: int) -> None:
            save_checkpoint(
                Path(scratch) / "ckpt", job_id=1, step=step, policy_version=step,
                model=policy, optimizer=optimizer, base_model_dir=model_dir, settings={},
                keep=2,
            )  # fmt: skip

        train_step(policy, reference, optimizer, rollouts, hyper)  # warm-up (allocations)
        steps, saves, refs, policies, updates = [], [], [], [], []
        for step in range(1, args.steps + 1):
            steps.append(timed(lambda: train_step(policy, reference, optimizer, rollouts, hyper)))
            saves.append(timed(lambda step=step: checkpoint(step)))  # type: ignore[misc]
            refs.append(timed(reference_forward))
            policies.append(timed(policy_forward_backward))
            updates.append(timed(optimizer.step))
            optimizer.zero_grad(set_to_none=True)
        trl_updates = []
        if args.trl:
            trl_updates = trl_seconds_per_update(model_dir, rollouts, args, Path(scratch))

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
    if trl_updates:
        trl_step = statistics.median(trl_updates) * args.updates
        print(
            f"\nTRL GRPOTrainer, same step ({args.updates} updates of "
            f"{samples // args.updates} samples, median of {len(trl_updates)} updates): "
            f"{trl_step:.3f} s a step, {samples / trl_step:.2f} samples/s. "
            f"**Cobalt / TRL = {trl_step / step_s:.2f}x** training samples per second "
            "(target >= 1.0)."
        )


if __name__ == "__main__":
    main()
