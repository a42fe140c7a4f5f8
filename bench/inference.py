"""What Cobalt's control path costs on vLLM's generation path, measured side by side.

The same model is served by two servers, one at a time, alternately (vllm, cobalt,
vllm, cobalt, ...; two vLLM servers at once on 2 cores disturb each other):
- vllm: vLLM's own OpenAI server, started with the same command line and environment as
  ours but without Cobalt's middleware and worker extension;
- cobalt: `cobalt inference serve` (the middleware stamps every response with the policy
  version and passes generation requests through its gate).
Each start is driven by the same load: `--concurrency` requests in flight, each a
completion of `--max-tokens` tokens from a fixed 32-token prompt with `ignore_eos`, so
both generate exactly the same number of tokens; the median round time is compared.
The end-to-end difference is within the machine's noise, so the middleware is also timed
alone (an in-process ASGI call with and without it, no network), which gives its cost per
request exactly. Also reported: start-up time to ready, resident memory of the server's
processes, and the time a weight load takes.

    .venv/bin/python bench/inference.py [--model DIR] [--sessions 2] [--rounds 6] [--requests 48]

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
    parser.add_argument("--rounds", type=int, default=6, help="rounds per server start")
    parser.add_argument("--sessions", type=int, default=2, help="starts of each server")
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
    probes = {"vllm": "/health", "cobalt": "/ready"}
    startup: dict[str, list[float]] = {"vllm": [], "cobalt": []}
    rss: dict[str, list[float]] = {"vllm": [], "cobalt": []}
    times: dict[str, list[float]] = {"vllm": [], "cobalt": []}
    load_s: list[float] = []
    print(f"model {model}, device {device}")
    # One server at a time: two vLLM servers on 2 cores disturb each other (their OpenMP
    # threads spin while idle), which swamps the difference being measured.
    for session, kind in enumerate(["vllm", "cobalt"] * args.sessions):
        settings = InferenceSettings(
            model=model, served_name=name, port=free_port(), max_model_len=1024
        )
        command = server_command(settings, device)
        if kind == "vllm":
            command = without_cobalt(command)
        url = f"http://127.0.0.1:{settings.port}"
        log = work / f"{kind}-{session}.log"
        env = server_environment(settings, device)
        with server(command, env, url, probes[kind], log) as (seconds, pid):
            startup[kind].append(seconds)
            asyncio.run(one_round(url, name, 8, args.concurrency, args.max_tokens))  # warm-up
            for _ in range(args.rounds):
                times[kind].append(
                    asyncio.run(
                        one_round(url, name, args.requests, args.concurrency, args.max_tokens)
                    )
                )
            rss[kind].append(group_rss_mb(pid))
            if kind == "cobalt":
                loaded = httpx.post(
                    url + "/v1/policy/weights",
                    json={"path": str(model), "version": session + 1},
                    timeout=600,
                )
                loaded.raise_for_status()
                load_s.append(float(loaded.json()["load_s"]))
        print(f"  {kind}: ready in {seconds:.0f} s, rounds {times[kind][-args.rounds :]}")

    tokens = args.requests * args.max_tokens
    median = {kind: statistics.median(values) for kind, values in times.items()}
    print()
    print(
        "| server | start-up to ready s | RSS MiB | requests/s (median round) | "
        "output tokens/s | throughput vs vllm |"
    )
    print("|---|---|---|---|---|---|")
    for kind in ("vllm", "cobalt"):
        print(
            f"| {kind} | {statistics.median(startup[kind]):.0f} | "
            f"{statistics.median(rss[kind]):.0f} | {args.requests / median[kind]:.1f} | "
            f"{tokens / median[kind]:.0f} | {median['vllm'] / median[kind]:.3f} |"
        )
    overhead_us = middleware_overhead_us()
    per_request_ms = median["cobalt"] / args.requests * args.concurrency * 1000
    print(
        f"\nmiddleware alone: {overhead_us:.1f} us per request (in-process ASGI, no network); "
        f"a request here takes {per_request_ms:.0f} ms, so {overhead_us / 10 / per_request_ms:.4f}%"
    )
    print(f"weight load (same weights, new version): median {statistics.median(load_s):.3f} s")
    print(f"logs in {work}")


def middleware_overhead_us(requests: int = 20000) -> float:
    """Microseconds the control middleware adds to one request, measured without vLLM."""
    from cobalt.inference.control import PolicyControlMiddleware

    async def endpoint(scope: object, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"{}"})  # type: ignore[operator]

    wrapped = PolicyControlMiddleware(endpoint, InferenceSettings(model=Path("/nonexistent")))
    scope = {"type": "http", "path": "/v1/completions", "method": "POST", "headers": []}

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: object) -> None:
        return None

    async def timed(app: object) -> float:
        started = time.perf_counter()
        for _ in range(requests):
            await app(scope, receive, send)  # type: ignore[operator]
        return time.perf_counter() - started

    async def both() -> float:
        bare = min([await timed(endpoint) for _ in range(3)])
        with_middleware = min([await timed(wrapped) for _ in range(3)])
        return (with_middleware - bare) / requests * 1e6

    return asyncio.run(both())


if __name__ == "__main__":
    main()
