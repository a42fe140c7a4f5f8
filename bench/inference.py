"""What Cobalt's control path costs on vLLM's generation path, measured side by side.

Two servers on the same model run at once on this machine:
- vllm: vLLM's own OpenAI server, started with the same command line and environment as
  ours but without Cobalt's middleware and worker extension;
- cobalt: `cobalt inference serve` (the middleware stamps every response with the policy
  version and passes generation requests through its gate).
Both are driven alternately (vllm then cobalt, then cobalt then vllm, ...) by the same
load: `--concurrency` requests in flight, each a completion of `--max-tokens` tokens from
a fixed 32-token prompt with `ignore_eos`, so both generate exactly the same number of
tokens. Alternating rounds cancel the machine's drift; the median round time of each side
is compared. Also reported: start-up time to ready, resident memory of each server's
processes, and (cobalt only) the time a weight load takes.

    .venv/bin/python bench/inference.py [--model DIR] [--rounds 6] [--requests 48]

Without --model a tiny random model is built (the test model). Prints markdown tables;
the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from cobalt.inference.launcher import (
    CONTROL_MIDDLEWARE,
    WORKER_EXTENSION,
    detect_device,
    inference_python,
    server_command,
    server_environment,
)
from cobalt.inference.settings import InferenceSettings
from cobalt.shared.clients.local_executor import free_port

PROMPT = [(7 * i + 3) % 1500 + 10 for i in range(32)]


def without_cobalt(command: list[str]) -> list[str]:
    """The same vLLM command line minus Cobalt's two additions."""
    plain: list[str] = []
    skip = False
    for index, arg in enumerate(command):
        if skip:
            skip = False
            continue
        if arg in ("--middleware", "--worker-extension-cls") and index + 1 < len(command):
            assert command[index + 1] in (CONTROL_MIDDLEWARE, WORKER_EXTENSION)
            skip = True
            continue
        plain.append(arg)
    return plain


def group_rss_mb(pgid: int) -> float:
    """Resident memory of every process in a process group (API server + engine core)."""
    total_kb = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != pgid:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total_kb += int(line.split()[1])
        except (OSError, ProcessLookupError, ValueError):
            continue
    return total_kb / 1024


@contextmanager
def server(
    command: list[str], env: dict[str, str], url: str, probe: str, log: Path
) -> Iterator[tuple[float, int]]:
    started = time.monotonic()
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        while True:
            if process.poll() is not None:
                raise SystemExit(f"server exited; see {log}")
            try:
                if httpx.get(url + probe, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.25)
        yield time.monotonic() - started, process.pid
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


async def one_round(url: str, name: str, requests: int, concurrency: int, tokens: int) -> float:
    """Seconds to finish `requests` completions with `concurrency` in flight."""
    gate = asyncio.Semaphore(concurrency)
    body = {
        "model": name,
        "prompt": PROMPT,
        "max_tokens": tokens,
        "temperature": 1.0,
        "ignore_eos": True,
    }
    async with httpx.AsyncClient(base_url=url, timeout=300) as client:

        async def request() -> None:
            async with gate:
                response = await client.post("/v1/completions", json=body)
                response.raise_for_status()
                assert response.json()["usage"]["completion_tokens"] == tokens

        started = time.perf_counter()
        await asyncio.gather(*(request() for _ in range(requests)))
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="model directory (default: tiny random)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per server")
    parser.add_argument("--requests", type=int, default=48, help="requests per round")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="cobalt-bench-inference-"))
    model = args.model
    base = InferenceSettings()
    python = inference_python(base)
    if model is None:
        model = work / "tiny"
        subprocess.run(
            [str(python), "-m", "cobalt.inference.cli", "make-tiny-model", str(model)],
            check=True,
            capture_output=True,
        )
    name = "bench"
    device = detect_device(python)
    settings = {
        kind: InferenceSettings(model=model, served_name=name, port=free_port(), max_model_len=1024)
        for kind in ("vllm", "cobalt")
    }
    commands = {
        "vllm": without_cobalt(server_command(settings["vllm"], device)),
        "cobalt": server_command(settings["cobalt"], device),
    }
    urls = {kind: f"http://127.0.0.1:{s.port}" for kind, s in settings.items()}
    probes = {"vllm": "/health", "cobalt": "/ready"}
    startup: dict[str, float] = {}
    rss: dict[str, float] = {}
    times: dict[str, list[float]] = {"vllm": [], "cobalt": []}
    load_s: float | None = None
    print(f"model {model}, device {device}; starting both servers one after the other")
    with (
        server(
            commands["vllm"],
            server_environment(settings["vllm"], device),
            urls["vllm"],
            probes["vllm"],
            work / "vllm.log",
        ) as (startup["vllm"], vllm_pid),
        server(
            commands["cobalt"],
            server_environment(settings["cobalt"], device),
            urls["cobalt"],
            probes["cobalt"],
            work / "cobalt.log",
        ) as (startup["cobalt"], cobalt_pid),
    ):
        for kind in ("vllm", "cobalt"):  # warm-up
            asyncio.run(one_round(urls[kind], name, 8, args.concurrency, args.max_tokens))
        for index in range(args.rounds):
            # Swap who goes first each round, so neither side always follows the other.
            for kind in ("vllm", "cobalt") if index % 2 == 0 else ("cobalt", "vllm"):
                times[kind].append(
                    asyncio.run(
                        one_round(
                            urls[kind], name, args.requests, args.concurrency, args.max_tokens
                        )
                    )
                )
        rss = {"vllm": group_rss_mb(vllm_pid), "cobalt": group_rss_mb(cobalt_pid)}
        loaded = httpx.post(
            urls["cobalt"] + "/v1/policy/weights",
            json={"path": str(model), "version": 10**6},
            timeout=600,
        )
        loaded.raise_for_status()
        load_s = float(loaded.json()["load_s"])

    tokens = args.requests * args.max_tokens
    print()
    print(
        "| server | start-up to ready s | RSS MiB | requests/s (median of rounds) | "
        "output tokens/s | ratio to vllm |"
    )
    print("|---|---|---|---|---|---|")
    median = {kind: statistics.median(values) for kind, values in times.items()}
    for kind in ("vllm", "cobalt"):
        ratio = median["vllm"] / median[kind]
        print(
            f"| {kind} | {startup[kind]:.0f} | {rss[kind]:.0f} | "
            f"{args.requests / median[kind]:.1f} | {tokens / median[kind]:.0f} | {ratio:.3f} |"
        )
    spread = {k: f"{min(v):.2f}-{max(v):.2f} s" for k, v in times.items()}
    print(f"\nround times: {spread}; weight load (same weights, new version): {load_s:.2f} s")
    print(f"logs in {work}")


if __name__ == "__main__":
    main()
