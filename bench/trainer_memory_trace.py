"""Where a trainer step's memory goes: resident memory and glibc's bytes in use and held,
sampled every 3 ms over `train_step` and attributed to the step's phases (policy forward,
reference forward, backward, AdamW), printed as the largest value per phase.

    .venv-trainer/bin/python bench/trainer_memory_trace.py --model DIR [--groups 2]
        [--budget 2048] [--no-checkpointing] [--malloc-trim] [--mmap-threshold BYTES] ...

(`--help` lists every option; the defaults are the figures' configuration: SmolLM2's
4 x (256 + 512) tokens per group, float32, activation checkpointing, kl_coef 1e-4, 2
updates, 1 with a single group.) glibc's own variables (MALLOC_ARENA_MAX,
MALLOC_MMAP_THRESHOLD_) apply when set in the environment.

Without --mmap-threshold the process keeps glibc's default (a threshold that rises to
32 MiB), not what the trainer does (`--mmap-threshold 131072`, its
COBALT_TRAINER_MALLOC_MMAP_THRESHOLD): resident minus in-use is then what the allocator
keeps after tensors are freed (docs/benchmarks.md, "Resident memory against glibc").
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

from cobalt.trainer.allocator import release_freed_memory, set_mmap_threshold
from cobalt.trainer.precision import Precision, load_models
from cobalt.trainer.step import make_optimizer, train_step

_SPEC = importlib.util.spec_from_file_location(
    "bench_trainer", Path(__file__).with_name("trainer.py")
)
assert _SPEC is not None and _SPEC.loader is not None
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)

GIB = 1024**3


class _MallInfo2(ctypes.Structure):
    _FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(name, ctypes.c_size_t) for name in _FIELDS.split()]


def parse_config(argv: list[str]) -> dict[str, Any]:
    parser = argparse.ArgumentParser(
        description="Peak RSS and glibc's bytes in use / held per phase of one train_step.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--model", required=True, help="Hugging Face model directory")
    parser.add_argument("--groups", type=int, default=2, help="groups (4 samples each by default)")
    parser.add_argument("--updates", type=int, help="updates per step (unset: 2, with 1 group 1)")
    parser.add_argument("--n", type=int, default=4, help="samples per group")
    parser.add_argument("--prompt-tokens", type=int, default=256, help="prompt tokens per row")
    parser.add_argument("--response-tokens", type=int, default=512, help="response tokens per row")
    parser.add_argument("--budget", type=int, default=2048, help="micro-batch tokens")
    parser.add_argument("--steps", type=int, default=1, help="train_step calls")
    parser.add_argument(
        "--compute-dtype",
        default="float32",
        choices=["float32", "bfloat16"],
        help="forward/backward dtype",
    )
    parser.add_argument(
        "--no-checkpointing",
        action="store_true",
        help="keep activations instead of recomputing them",
    )
    parser.add_argument("--kl-coef", type=float, default=1e-4, help="0 loads no reference")
    parser.add_argument("--chunk-tokens", type=int, default=1024, help="log_prob_chunk_tokens")
    parser.add_argument(
        "--malloc-trim", action="store_true",
        help="malloc_trim(0) before each micro-batch and after each AdamW update",
    )  # fmt: skip
    parser.add_argument(
        "--mmap-threshold", type=int,
        help="mallopt(M_MMAP_THRESHOLD, BYTES) before the models load",
    )  # fmt: skip
    args = parser.parse_args(argv)
    return {
        "model_dir": args.model, "groups": args.groups, "n": args.n,
        "updates": args.updates or (1 if args.groups == 1 else 2),
        "prompt_tokens": args.prompt_tokens, "response_tokens": args.response_tokens,
        "budget": args.budget, "steps": args.steps, "compute_dtype": args.compute_dtype,
        "checkpointing": not args.no_checkpointing, "kl_coef": args.kl_coef,
        "chunk_tokens": args.chunk_tokens, "malloc_trim": args.malloc_trim,
        "mmap_threshold": args.mmap_threshold,
    }  # fmt: skip


def main() -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    config = parse_config(sys.argv[1:])
    if config["mmap_threshold"] is not None:
        assert set_mmap_threshold(config["mmap_threshold"]), "mallopt refused the threshold"
    phase, order, peaks, done = ["start"], [], {}, threading.Event()

    def sample() -> None:
        while not done.is_set():
            info = libc.mallinfo2()
            values = (bench.resident_bytes(), info.uordblks + info.hblkhd, info.arena + info.hblkhd)
            if phase[0] not in peaks:
                order.append(phase[0])
                peaks[phase[0]] = values
            peaks[phase[0]] = tuple(map(max, peaks[phase[0]], values))
            time.sleep(0.003)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    hyper = bench.hyperparameters(config)
    device = torch.device("cpu")
    precision = Precision.resolve(hyper, device)
    phase[0] = "load"
    policy, reference = load_models(Path(config["model_dir"]), hyper, precision, device)
    optimizer = make_optimizer(policy, hyper)
    rollouts = bench.synthetic_step(config, policy.config.vocab_size)
    count = [0]

    def mark(name: str, trim: bool = False) -> Any:
        def hook(*_: Any, **__: Any) -> None:
            if trim and config["malloc_trim"]:
                release_freed_memory()
            count[0] += 1
            phase[0] = f"{count[0]:03d} {name}"

        return hook

    policy.register_forward_pre_hook(mark("policy forward", trim=True))
    if reference is not None:
        reference.register_forward_pre_hook(mark("reference forward"))
        reference.register_forward_hook(mark("backward"))
    optimizer.register_step_pre_hook(mark("AdamW"))
    optimizer.register_step_post_hook(mark("after AdamW", trim=True))
    phase[0] = "pack"
    seconds = []
    for step in range(config["steps"]):
        started = time.perf_counter()
        train_step(policy, reference, optimizer, rollouts, hyper, precision=precision)
        seconds.append(time.perf_counter() - started)
        phase[0] = f"after step {step}"
    time.sleep(0.05)
    done.set()
    sampler.join()
    print("| phase | RSS GiB | malloc in use GiB | malloc held GiB |\n|---|---:|---:|---:|")
    for name in order:
        rss, used, held = (value / GIB for value in peaks[name])
        print(f"| {name} | {rss:.2f} | {used:.2f} | {held:.2f} |")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB
    top_used = max(used for _, used, _ in peaks.values()) / GIB
    print(f"\npeak RSS {peak:.2f} GiB, malloc in use {top_used:.2f} GiB")
    print("step seconds " + ", ".join(f"{s:.1f}" for s in seconds))


if __name__ == "__main__":
    main()
