"""Trainer step on the CPU at a fixed micro-batch budget: peak memory and step time by
batch size, side by side with TRL's GRPOTrainer, and the memory model's prediction.

One synthetic step as the trainer gets it from the ledger: G groups x --n samples,
prompts of --prompt-tokens and responses of --response-tokens random token ids, random
rewards, the sampler's logprobs. Each configuration runs in a fresh child process (so its
peak resident memory is its own), set up as the trainer sets itself up
(`precision.load_models`: float32 policy, the reference only when kl_coef > 0) and timed
over `train_step` with the paper's 2 updates per step (1 with a single group).

With --trl, TRL's `GRPOTrainer` trains on the same step in its own child process: the
same model, rows, lengths, loss settings (beta, clip 0.2/0.4, two-sided clip 3,
token-level loss), activation checkpointing setting, and the same micro-batch: as many
rows per forward as fit the budget (`per_device_train_batch_size`), the rest through its
gradient accumulation. Generation is taken out of both (TRL gets the token ids from a
`rollout_func`, as Cobalt's trainer gets them from the ledger).

    .venv-trainer/bin/python bench/trainer.py [--model tiny|DIR] [--micro-batch-tokens 2048]
        [--groups 1,2,4,8] [--n 4] [--prompt-tokens 256] [--response-tokens 512]
        [--steps 1] [--activation-checkpointing] [--compute-dtype float32] [--trl GROUPS]
        [--log-prob-chunk-tokens 1024] [--lora-rank R | only:R]

--lora-rank R adds a LoRA run of rank R (all-linear) for every budget and group count
beside the full fine-tuning rows (only:R: LoRA alone); TRL runs full fine-tuning only.

--micro-batch-tokens takes a comma list too (one table row per budget and group count).
--trl needs `pip install trl==1.16.0` in .venv-trainer (`make bench-trainer` does it).
DIR is a Hugging Face model directory, e.g. the SmolLM2 that `cobalt inference
prepare-model` writes to ~/.cache/cobalt/models/smollm2-135m-instruct. Prints a markdown
table; docs/benchmarks.md keeps the figures.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from cobalt.shared.contracts.training import TrainerHyperparameters
from cobalt.trainer.allocator import DEFAULT_MMAP_THRESHOLD, set_mmap_threshold
from cobalt.trainer.batching import micro_batch_tokens, plan_micro_batches
from cobalt.trainer.memory import MemoryEstimate, ModelShape, estimate_peak
from cobalt.trainer.precision import Precision, load_models
from cobalt.trainer.step import Rollouts, make_optimizer, train_step

GIB = 1024**3


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


def synthetic_step(config: dict[str, Any], vocab: int) -> Rollouts:
    rng = random.Random(0)
    groups, n = config["groups"], config["n"]
    rows = groups * n
    prompt, response = config["prompt_tokens"], config["response_tokens"]
    # One prompt per group: a group is n responses sampled for one context.
    contexts = [[rng.randrange(vocab) for _ in range(prompt)] for _ in range(groups)]
    return Rollouts(
        prompt_ids=[contexts[g] for g in range(groups) for _ in range(n)],
        response_ids=[[rng.randrange(vocab) for _ in range(response)] for _ in range(rows)],
        rewards=[rng.choice([-1.0, -0.1, 0.0, 0.2, 1.0]) for _ in range(rows)],
        group_ids=[g for g in range(groups) for _ in range(n)],
        old_log_probs=[[-2.0] * response for _ in range(rows)],
    )  # fmt: skip


def hyperparameters(config: dict[str, Any]) -> TrainerHyperparameters:
    return TrainerHyperparameters(
        n_samples=config["n"], contexts_per_step=config["groups"],
        updates_per_step=config["updates"], lr=1e-6, kl_coef=config["kl_coef"],
        max_prompt_tokens=config["prompt_tokens"], max_response_tokens=config["response_tokens"],
        micro_batch_tokens=config["budget"], compute_dtype=config["compute_dtype"],
        activation_checkpointing=config["checkpointing"],
        log_prob_chunk_tokens=config.get("chunk_tokens", 1024),
        lora_rank=config.get("lora_rank"), share_prompts=config.get("share_prompts", True),
    )  # fmt: skip


def resident_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def peak_resident_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def cobalt_child(config: dict[str, Any]) -> dict[str, Any]:
    """One configuration in this (fresh) process: the trainer's set-up, then its steps."""
    runtime = resident_bytes()  # interpreter, torch, transformers, verl: before any model
    if config["mmap_threshold"]:  # as the trainer does (TrainerSettings); 0: glibc's own
        set_mmap_threshold(config["mmap_threshold"])
    model_dir = Path(config["model_dir"])
    hyper = hyperparameters(config)
    device = torch.device("cpu")
    precision = Precision.resolve(hyper, device)
    policy, reference = load_models(model_dir, hyper, precision, device)
    optimizer = make_optimizer(policy, hyper)
    rollouts = synthetic_step(config, policy.config.vocab_size)
    seconds = []
    for _ in range(config["steps"]):
        started = time.perf_counter()
        updates = train_step(policy, reference, optimizer, rollouts, hyper, precision=precision)
        seconds.append(time.perf_counter() - started)
    largest = largest_micro_batch(rollouts, hyper)
    estimate, shape, adapter = predicted_peak(policy, reference, hyper, precision, largest,
                                              runtime)  # fmt: skip
    return {
        "step_s": statistics.median(seconds[1:] or seconds),
        "peak": peak_resident_bytes(),
        "runtime": runtime,
        "model": estimate.total,
        "terms": estimate.gib(),
        "micro_batches": updates[0]["micro_batches"],
        "largest_micro_batch": largest,
        "parameters": shape.parameters,
        "trained_parameters": adapter,
    }


def largest_micro_batch(rollouts: Rollouts, hyper: TrainerHyperparameters) -> int:
    """Tokens of the step's largest forward, as the trainer plans it: the memory model's T."""
    share = hyper.share_prompts
    packed = plan_micro_batches(rollouts, range(len(rollouts.rewards)), hyper.token_budget,
                                share_prompts=share)  # fmt: skip
    return max(micro_batch_tokens(rollouts, micro, share_prompts=share) for micro in packed)


def predicted_peak(
    policy: torch.nn.Module, reference: torch.nn.Module | None, hyper: TrainerHyperparameters,
    precision: Precision, largest: int, runtime: int,
) -> tuple[MemoryEstimate, ModelShape, int]:  # fmt: skip
    """The memory model's estimate for these models and settings (one process), the shape
    it read off the policy, and the parameters that train."""
    adapter = sum(p.numel() for p in policy.parameters() if p.requires_grad)
    shape = ModelShape.from_config(
        policy.config.to_dict(),
        parameters=sum(p.numel() for p in policy.parameters()) - (adapter if hyper.lora else 0),
    )
    estimate = estimate_peak(
        shape, micro_batch_tokens=largest, compute_bytes=precision.compute_dtype.itemsize,
        checkpointing=precision.activation_checkpointing, reference=reference is not None,
        chunk_tokens=hyper.log_prob_chunk_tokens, runtime_bytes=runtime,
        reference_bytes=None if reference is None
        else next(reference.parameters()).element_size(),
        lora_parameters=adapter if hyper.lora else None,
    )  # fmt: skip
    return estimate, shape, adapter


def trl_child(config: dict[str, Any]) -> dict[str, Any]:
    """TRL's GRPOTrainer on the same step, micro-batched the same way: seconds per step
    (its updates of the measured generation batch) and its peak."""
    from datasets import Dataset
    from transformers import AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    model_dir = Path(config["model_dir"])
    vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    rollouts = synthetic_step(config, vocab)
    samples = len(rollouts.rewards)
    row_tokens = config["prompt_tokens"] + config["response_tokens"]
    per_update = samples // config["updates"]
    per_micro = max(1, min(per_update, config["budget"] // row_tokens))
    while per_update % per_micro:
        per_micro -= 1
    accumulation = per_update // per_micro
    cursor = {"next": 0}

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        rows = [(cursor["next"] + i) % samples for i in range(len(prompts))]
        cursor["next"] += len(prompts)
        return {
            "prompt_ids": [list(rollouts.prompt_ids[r]) for r in rows],
            "completion_ids": [list(rollouts.response_ids[r]) for r in rows],
            "logprobs": [list((rollouts.old_log_probs or [])[r]) for r in rows],
        }

    rewards = iter(list(rollouts.rewards) * (config["steps"] + 2))

    def reward(prompts: list[Any], completions: list[Any], **_: Any) -> list[float]:
        return [next(rewards) for _ in completions]

    stamps: list[float] = []

    class Stamp(TrainerCallback):  # type: ignore[misc]
        def on_train_begin(self, *_: Any, **__: Any) -> None:
            stamps.append(time.perf_counter())

        def on_step_end(self, *_: Any, **__: Any) -> None:
            stamps.append(time.perf_counter())

    with tempfile.TemporaryDirectory() as scratch:
        trl_config = GRPOConfig(
            output_dir=scratch, per_device_train_batch_size=per_micro,
            gradient_accumulation_steps=accumulation,
            steps_per_generation=config["updates"] * accumulation,
            num_generations=config["n"], max_completion_length=config["response_tokens"],
            learning_rate=1e-6, weight_decay=0.01, max_grad_norm=1.0, beta=config["kl_coef"],
            epsilon=0.2, epsilon_high=0.4, delta=3.0, loss_type="dapo", num_iterations=1,
            max_steps=config["steps"] * config["updates"], use_cpu=True,
            bf16=config["compute_dtype"] == "bfloat16",
            gradient_checkpointing=bool(config["checkpointing"]),
            report_to=[], save_strategy="no", logging_steps=10_000, disable_tqdm=True, seed=0,
            dataloader_num_workers=0,
        )  # fmt: skip
        dataset = Dataset.from_list([{"prompt": f"problem {i}"} for i in range(samples * 64)])
        trainer = GRPOTrainer(
            model=str(model_dir), reward_funcs=reward, args=trl_config, train_dataset=dataset,
            processing_class=AutoTokenizer.from_pretrained(model_dir), rollout_func=rollout_func,
            callbacks=[Stamp()],
        )  # fmt: skip
        trainer.train()
    updates = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
    steps = [sum(updates[i : i + config["updates"]])
             for i in range(0, len(updates), config["updates"])]  # fmt: skip
    return {"step_s": statistics.median(steps[1:] or steps), "peak": peak_resident_bytes(),
            "rows_per_forward": per_micro, "accumulation": accumulation}  # fmt: skip


def run_child(config: dict[str, Any]) -> dict[str, Any]:
    """One configuration in a fresh interpreter; its last stdout line is the result."""
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(config)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"child failed for {config}:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model", default="tiny", help="tiny, or a model directory")
    parser.add_argument("--micro-batch-tokens", default="2048", help="budget(s), comma list")
    parser.add_argument("--groups", default="1,2,4,8", help="group counts, comma list")
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--prompt-tokens", type=int, default=256)
    parser.add_argument("--response-tokens", type=int, default=512)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--kl-coef", type=float, default=1e-4)
    parser.add_argument("--compute-dtype", default="float32")
    parser.add_argument("--activation-checkpointing", action="store_true")
    parser.add_argument("--log-prob-chunk-tokens", type=int, default=1024)
    parser.add_argument("--trl", default="", help="group counts to also run TRL on")
    parser.add_argument("--lora-rank", default="", help="also (or only: 'only:R') LoRA rank R")
    parser.add_argument(
        "--share-prompts", choices=["on", "off", "both"], default="on",
        help="score a group's responses in one forward of its prompt (share_prompts), "
        "one row per response (off), or both side by side against the same TRL run [on]",
    )  # fmt: skip
    parser.add_argument(
        "--malloc-mmap-threshold", type=int, default=DEFAULT_MMAP_THRESHOLD,
        help="glibc's mmap threshold the Cobalt runs fix, as COBALT_TRAINER_MALLOC_MMAP_THRESHOLD "
        "(bytes; 0: glibc's dynamic default) [%(default)s]",
    )  # fmt: skip
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        config = json.loads(args.child)
        result = trl_child(config) if config.get("trl") else cobalt_child(config)
        print(json.dumps(result))
        return

    with tempfile.TemporaryDirectory() as scratch:
        model_dir = tiny_model(Path(scratch) / "tiny") if args.model == "tiny" else Path(args.model)
        base = {
            "model_dir": str(model_dir), "n": args.n, "prompt_tokens": args.prompt_tokens,
            "response_tokens": args.response_tokens, "steps": args.steps,
            "compute_dtype": args.compute_dtype, "checkpointing": args.activation_checkpointing,
            "kl_coef": args.kl_coef, "chunk_tokens": args.log_prob_chunk_tokens,
            "mmap_threshold": args.malloc_mmap_threshold,
        }  # fmt: skip
        ranks: list[int | None] = [None]
        if args.lora_rank:
            only = args.lora_rank.startswith("only:")
            rank = int(args.lora_rank.removeprefix("only:"))
            ranks = [rank] if only else [None, rank]
        sharing = {"on": [True], "off": [False], "both": [False, True]}[args.share_prompts]
        rows = []
        for rank in ranks:
            for budget in (int(b) for b in args.micro_batch_tokens.split(",")):
                for groups in (int(g) for g in args.groups.split(",")):
                    config = base | {"budget": budget, "groups": groups,
                                     "updates": min(2, groups), "lora_rank": rank}  # fmt: skip
                    results = [
                        (config | {"share_prompts": share},
                         run_child(config | {"share_prompts": share}))
                        for share in sharing
                    ]  # fmt: skip
                    trl = (
                        run_child(config | {"trl": True})
                        if str(groups) in args.trl.split(",") and rank is None
                        else None
                    )
                    rows += [(shared_config, result, trl) for shared_config, result in results]
                    print(f"done: budget {budget}, {groups} groups, LoRA rank {rank}",
                          file=sys.stderr, flush=True)  # fmt: skip
    print_table(args, rows)


def print_table(args: argparse.Namespace, rows: list[Any]) -> None:
    name = "tiny (Qwen2, hidden 64)" if args.model == "tiny" else Path(args.model).name
    parameters = rows[0][1]["parameters"]
    print(
        f"{name}: {parameters / 1e6:,.1f} M parameters; groups of {args.n} x "
        f"({args.prompt_tokens} + {args.response_tokens}) tokens; 2 updates per step (1 with "
        f"one group); compute {args.compute_dtype}, activation checkpointing "
        f"{'on' if args.activation_checkpointing else 'off'}, kl_coef {args.kl_coef}; torch "
        f"{torch.__version__}, {torch.get_num_threads()} threads; each row a fresh process.\n"
    )
    print(
        "| trains | shares prompts | budget | groups | micro-batches per update | step s "
        "| samples/s "
        "| peak RSS GiB | model GiB | model / peak | TRL step s | TRL peak GiB "
        "| **Cobalt / TRL** |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for config, result, trl in rows:
        samples = config["groups"] * config["n"]
        trl_cells = ["", "", ""]
        if trl is not None:
            trl_cells = [f"{trl['step_s']:.1f}", f"{trl['peak'] / GIB:.2f}",
                         f"**{trl['step_s'] / result['step_s']:.2f}x**"]  # fmt: skip
        rank = config.get("lora_rank")
        trains = "every weight" if rank is None else (
            f"LoRA r={rank} ({result['trained_parameters'] / 1e6:.2f} M)"
        )  # fmt: skip
        print(
            f"| {trains} | {'yes' if config['share_prompts'] else 'no'} "
            f"| {config['budget']} | {config['groups']} "
            f"| {result['micro_batches']:.0f} "
            f"| {result['step_s']:.1f} | {samples / result['step_s']:.2f} "
            f"| {result['peak'] / GIB:.2f} | {result['model'] / GIB:.2f} "
            f"| {result['model'] / result['peak']:.2f} | " + " | ".join(trl_cells) + " |"
        )
    first = rows[0][1]
    print(f"\nruntime before any model (in every peak): {first['runtime'] / GIB:.2f} GiB; "
          f"memory model terms of the first row (GiB): {first['terms']}")  # fmt: skip
    by_budget: dict[tuple[int, Any], list[Any]] = {}
    for config, result, _ in rows:
        key = (config["budget"], config.get("lora_rank"), config["share_prompts"])
        by_budget.setdefault(key, []).append((config["groups"], result["peak"]))
    full = {(c["budget"], c["groups"], c["share_prompts"]): r["peak"]
            for c, r, _ in rows if not c.get("lora_rank")}  # fmt: skip
    for config, result, _ in rows:
        same = (config["budget"], config["groups"], config["share_prompts"])
        if config.get("lora_rank") and same in full:
            base_peak = full[same]
            print(f"budget {config['budget']}, {config['groups']} groups: LoRA peak / full "
                  f"peak = {result['peak'] / base_peak:.2f}x")  # fmt: skip
    for (budget, _rank, shared), peaks in by_budget.items():
        if len(peaks) > 1:
            (g0, p0), (g1, p1) = min(peaks), max(peaks)
            print(f"budget {budget}, prompts {'shared' if shared else 'not shared'}: peak at "
                  f"{g1} groups / at {g0} = {p1 / p0:.2f}x "
                  f"(target <= 1.3x); largest {p1 / GIB:.2f} GiB")  # fmt: skip


if __name__ == "__main__":
    main()
