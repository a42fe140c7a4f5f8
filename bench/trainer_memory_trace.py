"""Where a trainer step's memory goes: resident memory and glibc's bytes in use and held,
sampled every 3 ms over `train_step` and attributed to the step's phases (policy forward,
reference forward, backward, AdamW), printed as the largest value per phase.

    .venv-trainer/bin/python bench/trainer_memory_trace.py '{"model_dir": DIR, "n": 4,
        "prompt_tokens": 256, "response_tokens": 512, "steps": 1, "compute_dtype": "float32",
        "checkpointing": true, "kl_coef": 0.0001, "budget": 2048, "groups": 2, "updates": 2}'

Resident minus in-use is what the allocator keeps after tensors are freed
(docs/benchmarks.md, "Where SmolLM2's memory went").
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

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


def main() -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _MallInfo2
    config = json.loads(sys.argv[1])
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

    def mark(name: str) -> Any:
        def hook(*_: Any, **__: Any) -> None:
            count[0] += 1
            phase[0] = f"{count[0]:03d} {name}"

        return hook

    policy.register_forward_pre_hook(mark("policy forward"))
    if reference is not None:
        reference.register_forward_pre_hook(mark("reference forward"))
        reference.register_forward_hook(mark("backward"))
    optimizer.register_step_pre_hook(mark("AdamW"))
    optimizer.register_step_post_hook(mark("after AdamW"))
    phase[0] = "pack"
    for step in range(config.get("steps", 1)):
        train_step(policy, reference, optimizer, rollouts, hyper, precision=precision)
        phase[0] = f"after step {step}"
    time.sleep(0.05)
    done.set()
    sampler.join()
    print("| phase | RSS GiB | malloc in use GiB | malloc held GiB |\n|---|---:|---:|---:|")
    for name in order:
        rss, used, held = (value / GIB for value in peaks[name])
        print(f"| {name} | {rss:.2f} | {used:.2f} | {held:.2f} |")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / GIB
    print(f"\npeak RSS {peak:.2f} GiB")


if __name__ == "__main__":
    main()
