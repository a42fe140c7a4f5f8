"""The trainer on one GPU (issue 39): its equivalences on CUDA, its peak memory at real
shapes against the memory model, and its speed with prompt sharing on and off.

    bench/gpu_trainer.sh run                  on the GPU machine (docs/development.md)
    .venv-trainer/bin/python bench/gpu_trainer.py --device cpu --tiny      the dry-run

Sections, in this order; the JSON (--out) is rewritten after every row, so a run that its
time guard (--budget-s) or a hard timeout stops keeps what it finished:

1. equality: cobalt.trainer.equivalence's checks (micro-batched against unbatched,
   chunked against direct log-probabilities, prompt sharing against one row per response,
   a LoRA step against its base) on a tiny Qwen3 with grouped-query heads, in float32 and
   in bfloat16 autocast, each against `equivalence.TOLERANCES` of its dtype;
2. memory: one GRPO step, after a warm-up step (so AdamW's moments exist), of randomly
   initialised models built from a config (no download): Qwen3-1.7B's shape trained
   fully (reference on, kl_coef 1e-4) and Qwen3-8B's with a rank-16 LoRA, at micro-batch
   budgets of 4k, 8k and 16k tokens, the trainer's GPU defaults (bfloat16 autocast,
   activation checkpointing, prompt sharing), beside `cobalt.trainer.memory`'s estimate.
   CUDA: `max_memory_allocated` against the estimate without its runtime term, and
   `max_memory_reserved` + the CUDA context against the whole estimate. CPU (dry-run):
   the sampled peak resident memory against the estimate with the resident memory before
   the models as its runtime term; labelled as such in the JSON and the table;
3. speed: the 1.7B shape's step with prompt sharing off and on, one group of n responses
   of uneven length to a long prompt, at one budget: tokens/s (prompt + response tokens
   of every response, per second: the same work either way), which SDPA kernel ran
   (torch.profiler's aten ops over a warm-up step), the model FLOPs of the step and their
   utilisation of the device's bfloat16 peak (MFU; --peak-tflops, or known for H100/H200).

--tiny and --small run the same path at CPU sizes (small configs of the same
architectures); `tests/trainer/test_gpu_trainer.py` runs --tiny in `make test`.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import platform
import random
import runpy
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch
from transformers import AutoConfig, PretrainedConfig

from cobalt.trainer.allocator import DEFAULT_MMAP_THRESHOLD, set_mmap_threshold
from cobalt.trainer.batching import plan_micro_batches
from cobalt.trainer.equivalence import TOLERANCES, all_checks, tiny_config
from cobalt.trainer.memory import GPU_RUNTIME_BYTES, ModelShape
from cobalt.trainer.precision import Precision, load_models
from cobalt.trainer.step import Rollouts, make_optimizer, train_step

# bench/trainer.py's workload, settings and estimate (a script, not a package).
bench = SimpleNamespace(**runpy.run_path(str(Path(__file__).with_name("trainer.py"))))

GIB = 1024**3

QWEN3_1_7B = {
    "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 151_936, "max_position_embeddings": 40_960, "tie_word_embeddings": True,
}  # fmt: skip
QWEN3_8B = {
    "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 36,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
    "vocab_size": 151_936, "max_position_embeddings": 40_960, "tie_word_embeddings": False,
}  # fmt: skip
"""The shapes of the models' config.json (Qwen/Qwen3-1.7B, Qwen/Qwen3-8B)."""

PEAK_BF16_FLOPS = {"H100": 989.4e12, "H200": 989.4e12, "A100": 312e12}
"""Dense bfloat16 tensor-core peaks (NVIDIA's data sheets, SXM parts), by device name."""

SDPA_KERNELS = {
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash",
    "aten::_scaled_dot_product_efficient_attention": "memory-efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
}
"""The op each SDPA backend runs as (forward); the profiler counts their calls."""


@dataclass(frozen=True)
class Speed:
    """The speed section's step: one group of n responses to one prompt."""

    n: int
    prompt_tokens: int
    response_tokens: int
    """The mean; responses spread from half to one and a half times it."""
    budget: int


@dataclass(frozen=True)
class Sizes:
    full_name: str
    full: dict[str, Any]
    lora_name: str
    lora: dict[str, Any]
    lora_rank: int
    budgets: tuple[int, ...]
    speed: Speed
    quick_equality: bool


def decoder(
    hidden: int, intermediate: int, layers: int, heads: int, head_dim: int, vocab: int,
    tied: bool,
) -> dict[str, Any]:  # fmt: skip
    """A Qwen3 shape for the CPU runs (two key/value heads)."""
    return {"hidden_size": hidden, "intermediate_size": intermediate,
            "num_hidden_layers": layers, "num_attention_heads": heads,
            "num_key_value_heads": 2, "head_dim": head_dim, "vocab_size": vocab,
            "tie_word_embeddings": tied}  # fmt: skip


SIZES = {
    "real": Sizes("Qwen3-1.7B", QWEN3_1_7B, "Qwen3-8B", QWEN3_8B, 16, (4096, 8192, 16384),
                  Speed(n=8, prompt_tokens=6144, response_tokens=1024, budget=16384), False),
    "small": Sizes("Qwen3-small", decoder(256, 768, 4, 4, 64, 8192, tied=True),
                   "Qwen3-small-wide", decoder(512, 1536, 4, 8, 64, 8192, tied=False), 8,
                   (512, 1024, 2048),
                   Speed(n=8, prompt_tokens=768, response_tokens=128, budget=2048), True),
    "tiny": Sizes("Qwen3-tiny", decoder(64, 128, 2, 4, 16, 512, tied=True),
                  "Qwen3-tiny-wide", decoder(96, 192, 2, 4, 24, 512, tied=False), 4,
                  (64, 128, 256), Speed(n=4, prompt_tokens=48, response_tokens=16, budget=256),
                  True),
}  # fmt: skip


def qwen3(shape: dict[str, Any]) -> PretrainedConfig:
    config: PretrainedConfig = AutoConfig.for_model("qwen3", **shape)
    return config


class Report:
    """The run's JSON, rewritten whole after every row."""

    def __init__(self, path: Path, meta: dict[str, Any]) -> None:
        self.path = path
        self.data: dict[str, Any] = {"meta": meta, "equality": [], "memory": {"rows": []},
                                     "speed": {"rows": []}, "skipped": []}  # fmt: skip

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps(self.data, indent=2) + "\n")
        partial.replace(self.path)


class TimeGuard:
    """Stops the run cleanly before its budget: a row starts only if its expected cost
    fits in what is left; what did not fit is listed in the JSON's `skipped`."""

    def __init__(self, budget_s: float, report: Report) -> None:
        self.started = time.monotonic()
        self.budget_s = budget_s
        self.report = report

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def allows(self, what: str, needs_s: float) -> bool:
        if self.elapsed() + needs_s <= self.budget_s:
            return True
        self.report.data["skipped"].append(
            {"what": what, "at_s": round(self.elapsed(), 1), "needed_s": needs_s}
        )
        self.report.save()
        print(f"time guard: skipped {what} ({self.elapsed():.0f} s of {self.budget_s:.0f})",
              file=sys.stderr, flush=True)  # fmt: skip
        return False


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# --- 1. equality -------------------------------------------------------------------------


def equality(device: torch.device, guard: TimeGuard, quick: bool) -> None:
    config = tiny_config("qwen3", heads=4, kv_heads=2, head_dim=16)
    for dtype in (torch.float32, torch.bfloat16):
        if not guard.allows(f"equality checks in {dtype}", 10 if device.type == "cuda" else 20):
            continue
        tolerance = TOLERANCES[dtype]
        precision = Precision(compute_dtype=dtype)
        for comparison in all_checks(config, device, precision, quick=quick):
            outside = comparison.outside(tolerance)
            guard.report.data["equality"].append(
                {"dtype": str(dtype).removeprefix("torch."), "passed": not outside,
                 "outside": outside, "tolerance": vars(tolerance)} | comparison.as_dict()
            )  # fmt: skip
            guard.report.save()


# --- 2. memory ---------------------------------------------------------------------------


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class ResidentPeak:
    """The CPU's stand-in for max_memory_allocated: resident memory sampled every 2 ms."""

    def __init__(self) -> None:
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, resident_bytes())
            time.sleep(0.002)

    def __enter__(self) -> ResidentPeak:
        self.peak = resident_bytes()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, resident_bytes())


def memory_workload(budget: int) -> dict[str, Any]:
    """Two groups of 4 whose prompt + responses fill the budget exactly: two micro-batches
    of `budget` tokens each with prompt sharing (the trainer's default)."""
    return {"groups": 2, "n": 4, "updates": 1, "prompt_tokens": budget // 4,
            "response_tokens": 3 * budget // 16, "budget": budget, "kl_coef": 1e-4,
            "compute_dtype": "auto", "checkpointing": True, "chunk_tokens": 1024,
            "share_prompts": True}  # fmt: skip


@contextmanager
def loaded(
    config: PretrainedConfig, hyper: Any, device: torch.device
) -> Iterator[tuple[torch.nn.Module, torch.nn.Module | None, Any, Precision]]:
    """The trainer's models and optimizer for these settings, freed after."""
    precision = Precision.resolve(hyper, device)
    policy, reference = load_models(config, hyper, precision, device)
    optimizer = make_optimizer(policy, hyper)
    try:
        yield policy, reference, optimizer, precision
    finally:
        del policy, reference, optimizer
        release(device)


def context_bytes(device: torch.device) -> int:
    """Device memory this process holds outside PyTorch's allocator (the CUDA context)."""
    free, total = torch.cuda.mem_get_info(device)
    return total - free - torch.cuda.memory_reserved(device)


def measure_step(
    policy: torch.nn.Module, reference: torch.nn.Module | None, optimizer: Any,
    rollouts: Rollouts, hyper: Any, precision: Precision, device: torch.device,
) -> dict[str, int]:  # fmt: skip
    """One step's peak: allocated and reserved on CUDA; sampled resident memory on the CPU."""
    release(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        train_step(policy, reference, optimizer, rollouts, hyper, precision=precision)
        synchronize(device)
        return {"allocated": torch.cuda.max_memory_allocated(device),
                "reserved": torch.cuda.max_memory_reserved(device)}  # fmt: skip
    with ResidentPeak() as sampled:
        train_step(policy, reference, optimizer, rollouts, hyper, precision=precision)
    return {"resident": sampled.peak}


def memory_rows(
    name: str, config: PretrainedConfig, sizes: Sizes, lora_rank: int | None,
    device: torch.device, guard: TimeGuard, *, then_speed: bool = False,
) -> None:  # fmt: skip
    """Warm-up step at the smallest budget, then one measured step per budget; then, with
    `then_speed`, the speed section on the same model."""
    cuda = device.type == "cuda"
    build_s = (60 if lora_rank else 30) if cuda else 20
    if not guard.allows(f"memory of {name}", build_s + 20):
        return
    workloads = [memory_workload(budget) for budget in sizes.budgets]
    largest_budget = bench.hyperparameters(workloads[-1] | {"lora_rank": lora_rank})
    release(device)
    runtime = resident_bytes() if not cuda else GPU_RUNTIME_BYTES
    with loaded(config, largest_budget, device) as (policy, reference, optimizer, precision):
        context = 0
        vocab = policy.config.vocab_size
        for i, workload in enumerate(workloads):
            workload = workload | {"lora_rank": lora_rank}
            hyper = bench.hyperparameters(workload)
            rollouts = bench.synthetic_step(workload, vocab)
            step_s = 30 if cuda else 10
            if not guard.allows(f"memory of {name} at {workload['budget']} tokens", step_s):
                break
            if i == 0:  # AdamW's moments, the allocator's pools: the steady state
                train_step(policy, reference, optimizer, rollouts, hyper, precision=precision)
                # The context once cuBLAS, cuDNN and the kernels' modules are loaded.
                context = context_bytes(device) if cuda else 0
            started = time.perf_counter()
            peak = measure_step(policy, reference, optimizer, rollouts, hyper, precision, device)
            seconds = time.perf_counter() - started
            largest = bench.largest_micro_batch(rollouts, hyper)
            estimate, shape, trained = bench.predicted_peak(
                policy, reference, hyper, precision, largest, runtime
            )
            row: dict[str, Any] = {
                "model": name, "trains": f"LoRA r={lora_rank}" if lora_rank else "every weight",
                "budget": workload["budget"], "largest_micro_batch": largest,
                "parameters": shape.parameters, "trained_parameters": trained,
                "compute_dtype": str(precision.compute_dtype).removeprefix("torch."),
                "checkpointing": precision.activation_checkpointing,
                "reference": reference is not None, "step_s": round(seconds, 3),
                "predicted_terms_bytes": asdict(estimate),
            }  # fmt: skip
            if cuda:
                predicted = estimate.total - estimate.runtime
                device_peak = peak["reserved"] + context
                row |= {
                    "measure": "cuda: max_memory_allocated; max_memory_reserved + context",
                    "measured_gib": peak["allocated"] / GIB,
                    "predicted_gib": predicted / GIB,
                    "error": predicted / peak["allocated"] - 1,
                    "reserved_gib": peak["reserved"] / GIB, "context_gib": context / GIB,
                    "device_peak_gib": device_peak / GIB,
                    "predicted_device_gib": estimate.total / GIB,
                    "error_device": estimate.total / device_peak - 1,
                }  # fmt: skip
            else:
                row |= {
                    "measure": "cpu: peak resident memory, sampled every 2 ms (not a GPU "
                    "allocator figure); the estimate's runtime term is the resident memory "
                    "before the models",
                    "measured_gib": peak["resident"] / GIB,
                    "predicted_gib": estimate.total / GIB,
                    "error": estimate.total / peak["resident"] - 1,
                }  # fmt: skip
            guard.report.data["memory"]["rows"].append(row)
            guard.report.save()
            print(f"memory: {name} at {workload['budget']} tokens done", file=sys.stderr,
                  flush=True)  # fmt: skip
        if then_speed:
            speed(policy, reference, optimizer, precision, sizes.speed, device, guard)


# --- 3. speed ----------------------------------------------------------------------------


def speed_rollouts(workload: Speed, vocab: int) -> Rollouts:
    """One group: n responses to one prompt, lengths spread evenly from half to one and a
    half times the mean, so rows without sharing are padded."""
    rng = random.Random(0)
    n, mean = workload.n, workload.response_tokens
    lengths = [max(1, mean // 2 + (mean * i) // max(1, n - 1)) for i in range(n)]
    prompt = [rng.randrange(vocab) for _ in range(workload.prompt_tokens)]
    return Rollouts(
        prompt_ids=[prompt] * n,
        response_ids=[[rng.randrange(vocab) for _ in range(length)] for length in lengths],
        rewards=[rng.choice([-1.0, 0.0, 0.5, 1.0]) for _ in range(n)],
        group_ids=[0] * n,
        old_log_probs=[[-2.0] * length for length in lengths],
    )


def step_flops(
    shape: ModelShape, config: PretrainedConfig, rollouts: Rollouts, hyper: Any,
    reference: bool,
) -> dict[str, float]:  # fmt: skip
    """Model FLOPs of the step as the trainer plans it (no recomputation counted): per
    token forwarded, 2 x the decoder's matrix weights and 4 x the query width x the keys
    it attends to (causal: itself and what precedes it in its prompt + response); per
    response token, 2 x the head. The policy's forward and backward are 3 forwards, the
    reference's forward 1."""
    heads, head_dim = config.num_attention_heads, config.head_dim
    query = heads * head_dim
    per_layer = (2 * shape.hidden * query + 2 * shape.hidden * shape.kv_hidden
                 + 3 * shape.hidden * shape.intermediate)  # fmt: skip
    plan = plan_micro_batches(rollouts, range(len(rollouts.rewards)), hyper.token_budget,
                              share_prompts=hyper.share_prompts)  # fmt: skip
    tokens = keys = 0
    for micro in plan:
        for segment in micro:
            prompt = len(rollouts.prompt_ids[segment[0]])
            if hyper.share_prompts:  # the prompt once, each response after it
                tokens += prompt
                keys += prompt * (prompt + 1) // 2
                for row in segment:
                    length = len(rollouts.response_ids[row])
                    tokens += length
                    keys += length * prompt + length * (length + 1) // 2
            else:
                for row in segment:
                    length = prompt + len(rollouts.response_ids[row])
                    tokens += length
                    keys += length * (length + 1) // 2
    responses = sum(len(r) for r in rollouts.response_ids)
    forward = (2 * per_layer * shape.layers * tokens + 4 * query * shape.layers * keys
               + 2 * shape.hidden * shape.vocab * responses)  # fmt: skip
    return {"forwarded_tokens": float(tokens), "flops": float(forward * (4 if reference else 3))}


def sdpa_kernels(run: Callable[[], object]) -> dict[str, int]:
    """Calls of each SDPA backend's forward op while `run` runs (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        run()
    counts: dict[str, int] = {}
    for event in prof.key_averages():
        kind = SDPA_KERNELS.get(event.key)
        if kind is not None:
            counts[kind] = counts.get(kind, 0) + event.count
    return counts


def peak_flops(device: torch.device, given: float | None) -> float | None:
    if given is not None:
        return given * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((peak for key, peak in PEAK_BF16_FLOPS.items() if key in name), None)


def speed(
    policy: torch.nn.Module, reference: torch.nn.Module | None, optimizer: Any,
    precision: Precision, workload: Speed, device: torch.device, guard: TimeGuard,
) -> None:  # fmt: skip
    """The step with prompt sharing off, then on: same model, same rollouts."""
    config = policy.config
    rollouts = speed_rollouts(workload, config.vocab_size)
    section = guard.report.data["speed"]
    section["workload"] = vars(workload) | {
        "response_lengths": [len(r) for r in rollouts.response_ids]
    }
    logical = sum(len(p) + len(r) for p, r in zip(rollouts.prompt_ids, rollouts.response_ids,
                                                  strict=True))  # fmt: skip
    steps = int(guard.report.data["meta"]["speed_steps"])
    cuda = device.type == "cuda"
    for share in (False, True):
        if not guard.allows(f"speed with prompt sharing {'on' if share else 'off'}",
                            (15 if cuda else 5) * (steps + 1)):  # fmt: skip
            continue
        settings = {"n": workload.n, "groups": 1, "updates": 1, "kl_coef": 1e-4,
                    "prompt_tokens": workload.prompt_tokens,
                    "response_tokens": max(len(r) for r in rollouts.response_ids),
                    "budget": workload.budget, "compute_dtype": "auto", "checkpointing": True,
                    "chunk_tokens": 1024, "share_prompts": share}  # fmt: skip
        hyper = bench.hyperparameters(settings)

        def one_step(hyper: Any = hyper) -> list[dict[str, float]]:
            updates = train_step(policy, reference, optimizer, rollouts, hyper,
                                 precision=precision)  # fmt: skip
            synchronize(device)
            return updates

        kernels = sdpa_kernels(one_step)  # also the warm-up
        seconds = []
        for _ in range(steps):
            started = time.perf_counter()
            updates = one_step()
            seconds.append(time.perf_counter() - started)
        step_s = statistics.median(seconds)
        parameters = sum(p.numel() for p in policy.parameters())
        shape = ModelShape.from_config(config.to_dict(), parameters=parameters)
        flops = step_flops(shape, config, rollouts, hyper, reference is not None)
        peak = peak_flops(device, guard.report.data["meta"]["peak_tflops"])
        achieved = flops["flops"] / step_s
        section["rows"].append({
            "share_prompts": share, "step_s": step_s, "steps_timed": steps,
            "tokens": logical, "tokens_per_s": logical / step_s,
            "forwarded_tokens": flops["forwarded_tokens"],
            "micro_batches": updates[0]["micro_batches"], "sdpa_kernels": kernels,
            "model_flops": flops["flops"], "achieved_tflops": achieved / 1e12,
            "peak_tflops": None if peak is None else peak / 1e12,
            "mfu": None if peak is None else achieved / peak,
        })  # fmt: skip
        rows = section["rows"]
        if len(rows) == 2:
            section["sharing_speedup"] = rows[1]["tokens_per_s"] / rows[0]["tokens_per_s"]
        guard.report.save()
        print(f"speed: prompt sharing {'on' if share else 'off'} done", file=sys.stderr,
              flush=True)  # fmt: skip


# --- the run -----------------------------------------------------------------------------


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("torch", "transformers", "peft", "verl", "ray", "tensordict", "pydantic"):
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def imported_distributions() -> list[str]:
    """The installed distributions whose modules this process imported, names normalised:
    what the GPU machine must have (its image's packages, or bench/gpu_trainer_wheels.txt's).
    A module is placed by its file under a sys.path folder; a top-level name several
    distributions share (a namespace package such as `google`) goes to the one whose
    RECORD lists that file. cobalt's own sources travel as source and are left out."""
    roots = sorted({os.path.realpath(p) for p in sys.path if p and os.path.isdir(p)},
                   key=len, reverse=True)  # fmt: skip
    owners = importlib.metadata.packages_distributions()
    records: dict[str, set[str]] = {}

    def listed(name: str) -> set[str]:
        if name not in records:
            records[name] = {str(f) for f in importlib.metadata.files(name) or []}
        return records[name]

    found: set[str] = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not path:
            continue
        path = os.path.realpath(path)
        root = next((r for r in roots if path.startswith(r + os.sep)), None)
        if root is None:
            continue
        relative = Path(path).relative_to(root).as_posix()
        names = owners.get(relative.split("/")[0].split(".")[0], [])
        if len(names) > 1:
            names = [name for name in names if relative in listed(name)]
        found |= {n.lower().replace("_", "-").replace(".", "-") for n in names}
    return sorted(name for name in found if not name.startswith("cobalt"))


def describe(device: torch.device) -> dict[str, Any]:
    if device.type != "cuda":
        return {"name": platform.processor() or platform.machine(),
                "threads": torch.get_num_threads()}  # fmt: skip
    properties = torch.cuda.get_device_properties(device)
    return {"name": properties.name, "memory_gib": properties.total_memory / GIB,
            "multiprocessors": properties.multi_processor_count,
            "capability": f"{properties.major}.{properties.minor}",
            "cuda": torch.version.cuda}  # fmt: skip


def print_tables(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    meta = data["meta"]
    console.print(
        f"[bold]{meta['device']['name']}[/bold] ({meta['sizes']} sizes), "
        f"{meta['elapsed_s']:.0f} s of {meta['budget_s']:.0f}; {meta['versions']}"
    )
    table = Table(title="1. equality on the device")
    for column in ("dtype", "check", "passed", "largest difference (abs / rel)", "outside"):
        table.add_column(column)
    for row in data["equality"]:
        worst = max(row["differences"].items(), key=lambda item: item[1]["max_abs"])
        table.add_row(row["dtype"], row["name"], "yes" if row["passed"] else "[red]NO[/red]",
                      f"{worst[0]} {worst[1]['max_abs']:.1e} / {worst[1]['relative']:.1e}",
                      ", ".join(row["outside"]))  # fmt: skip
    console.print(table)
    table = Table(title="2. peak memory of one GRPO step against cobalt.trainer.memory")
    for column in ("model", "trains", "budget", "T", "measured GiB", "model GiB", "error",
                   "reserved+context GiB", "model (all) GiB", "error"):  # fmt: skip
        table.add_column(column, justify="right")
    for row in data["memory"]["rows"]:
        device_cells = ["", "", ""]
        if "device_peak_gib" in row:
            device_cells = [f"{row['device_peak_gib']:.2f}",
                            f"{row['predicted_device_gib']:.2f}",
                            f"{row['error_device']:+.0%}"]  # fmt: skip
        cells = [row["model"], row["trains"], str(row["budget"]), str(row["largest_micro_batch"]),
                 f"{row['measured_gib']:.2f}", f"{row['predicted_gib']:.2f}",
                 f"{row['error']:+.0%}"]  # fmt: skip
        table.add_row(*cells, *device_cells)
    console.print(table)
    if data["memory"]["rows"]:
        console.print(f"measured: {data['memory']['rows'][0]['measure']}")
    table = Table(title="3. speed of the step, prompt sharing off and on")
    for column in ("shares prompts", "step s", "tokens/s", "forwarded tokens",
                   "micro-batches", "SDPA kernels", "TFLOP/s", "MFU"):  # fmt: skip
        table.add_column(column, justify="right")
    for row in data["speed"]["rows"]:
        mfu = "" if row["mfu"] is None else f"{row['mfu']:.1%}"
        table.add_row("yes" if row["share_prompts"] else "no", f"{row['step_s']:.2f}",
                      f"{row['tokens_per_s']:,.0f}", f"{row['forwarded_tokens']:,.0f}",
                      f"{row['micro_batches']:.0f}",
                      ", ".join(f"{k} {v}" for k, v in sorted(row["sdpa_kernels"].items())),
                      f"{row['achieved_tflops']:.2f}", mfu)  # fmt: skip
    console.print(table)
    if "sharing_speedup" in data["speed"]:
        console.print(f"prompt sharing: {data['speed']['sharing_speedup']:.2f}x the tokens/s")
    if data["skipped"]:
        console.print(f"[yellow]skipped by the time guard: {data['skipped']}[/yellow]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (the GPU run) or cpu")
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--tiny", action="store_true", help="tiny configs: the CPU dry-run")
    size.add_argument("--small", action="store_true", help="small configs: a longer CPU run")
    parser.add_argument("--out", type=Path, default=Path("gpu_trainer.json"))
    parser.add_argument(
        "--budget-s",
        type=float,
        default=420.0,
        help="stop starting rows after this many seconds [%(default)s]",
    )
    parser.add_argument(
        "--sections",
        default="equality,memory,speed",
        help="comma list of equality, memory, speed [%(default)s]",
    )
    parser.add_argument("--speed-steps", type=int, default=2, help="timed steps per mode")
    parser.add_argument(
        "--peak-tflops", type=float, help="the device's bfloat16 peak for MFU (known for H100/H200)"
    )
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("no CUDA device: run with --device cpu (and --tiny) on a machine without one")
    sections = set(args.sections.split(","))
    if not sections <= {"equality", "memory", "speed"}:
        parser.error(f"unknown sections: {sorted(sections - {'equality', 'memory', 'speed'})}")
    sizes_name = "tiny" if args.tiny else "small" if args.small else "real"
    if device.type == "cpu" and not args.tiny:
        set_mmap_threshold(DEFAULT_MMAP_THRESHOLD)  # as the trainer does: freed memory returns
    threads = torch.get_num_threads()
    if args.tiny:
        torch.set_num_threads(1)  # tensors of a few kB: more threads only wait on each other
    try:
        return run(args, device, sizes_name)
    finally:
        torch.set_num_threads(threads)


def run(args: argparse.Namespace, device: torch.device, sizes_name: str) -> int:
    """The sections `args` asks for, the JSON, the tables; 1 if an equality check failed."""
    sizes = SIZES[sizes_name]
    sections = set(args.sections.split(","))
    report = Report(args.out, {
        "device": describe(device), "device_type": device.type, "sizes": sizes_name,
        "versions": versions(), "argv": args.argv,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "budget_s": args.budget_s, "speed_steps": args.speed_steps,
        "peak_tflops": args.peak_tflops, "elapsed_s": 0.0,
    })  # fmt: skip
    guard = TimeGuard(args.budget_s, report)
    report.save()
    torch.manual_seed(0)
    if "equality" in sections:
        equality(device, guard, sizes.quick_equality)
    if sections & {"memory", "speed"}:
        full = qwen3(sizes.full)
        if "memory" in sections:
            memory_rows(sizes.full_name, full, sizes, None, device, guard,
                        then_speed="speed" in sections)  # fmt: skip
        else:  # speed alone: the full model at the speed budget
            hyper = bench.hyperparameters(memory_workload(sizes.speed.budget) | {"lora_rank": None})
            with loaded(full, hyper, device) as (policy, reference, optimizer, precision):
                speed(policy, reference, optimizer, precision, sizes.speed, device, guard)
        if "memory" in sections:
            memory_rows(sizes.lora_name, qwen3(sizes.lora), sizes, sizes.lora_rank, device,
                        guard)  # fmt: skip
    report.data["meta"]["elapsed_s"] = guard.elapsed()
    report.data["meta"]["distributions"] = imported_distributions()
    report.save()
    print_tables(report.data)
    print(f"wrote {args.out}")
    failed = [row["name"] for row in report.data["equality"] if not row["passed"]]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
