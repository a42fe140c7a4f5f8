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

`--limits` (issue 32) measures the real model against the limits instead: output tokens/s
and time to first token at 1, 8, 24 and 64 concurrent streamed chat requests of
`--answer-tokens` (128, `ignore_eos`) for `cobalt inference serve` in the dtype the rule
of cobalt.shared.cpu_dtype picks and in the other one, llama.cpp's OpenAI-compatible
server (llama-cpp-python, .venv-bench: bench/requirements-limits.txt) on the GGUF SmolLM2
ships as and on a float32 GGUF of the same weights, and a roofline from the model's bytes
and FLOPs per token and this machine's measured bandwidth and matmul rate; then a py-spy
profile of the engine at 24 concurrent. `--trials` tries the engine settings the issue
names (threads, KV cache, batch limit, chunked prefill, prefix caching) at 24 concurrent.

    .venv/bin/python bench/inference.py --limits [--model DIR: default the prepared SmolLM2]
    .venv/bin/python bench/inference.py --trials [--model DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
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

from cobalt.inference.checkpoints import read_tensor_manifest
from cobalt.inference.launcher import (
    CONTROL_MIDDLEWARE,
    WORKER_EXTENSION,
    detect_device,
    inference_python,
    running_server,
    server_command,
    server_environment,
)
from cobalt.inference.settings import InferenceSettings
from cobalt.shared.cpu_dtype import choose_cpu_dtype
from cobalt.shared.ports import free_port

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
    parser.add_argument(
        "--limits",
        action="store_true",
        help="SmolLM2 (or --model) against the limits: both dtypes, llama.cpp, roofline",
    )
    parser.add_argument("--levels", type=int, nargs="+", default=list(LEVELS))
    parser.add_argument("--answer-tokens", type=int, default=128, help="--limits: per answer")
    parser.add_argument("--profile-s", type=int, default=20, help="--limits: py-spy seconds")
    parser.add_argument(
        "--trials", action="store_true", help="--limits: engine settings at 24 concurrent"
    )
    parser.add_argument(
        "--servers", type=int, nargs="+", default=[0, 1, 2, 3, 4],
        help="--limits: 0 the rule's dtype, 1 the other, 2 llama.cpp shipped GGUF, 3 f32 "
        "GGUF, 4/5 as 0/1 with chunked prefill off",
    )  # fmt: skip
    args = parser.parse_args()
    if args.trials:
        model = args.model or InferenceSettings().model_dir()
        work = Path(tempfile.mkdtemp(prefix="cobalt-bench-trials-"))
        setting_trials(model, work, 24, args.answer_tokens)
        return
    if args.limits:
        limits(args)
        return

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


# --- `--limits`: the real model against the hardware's limits (issue 32) -------------------

LEVELS = (1, 8, 24, 64)
CHAT = [{"role": "user", "content": "Write a Python function that checks whether a number "
                                    "is prime, and explain how it works."}]  # fmt: skip
BENCH_PYTHON = Path(__file__).resolve().parents[1] / ".venv-bench" / "bin" / "python"
"""llama-cpp-python[server] and gguf live here (bench/requirements-limits.txt), never in
`make setup`: building llama.cpp compiles C++ for minutes."""

MACHINE_PROBE = r"""
import json, time, torch
torch.set_num_threads(torch.get_num_threads())
def best(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter(); fn(); times.append(time.perf_counter() - start)
    return min(times)
# Memory bandwidth: a 512 MiB copy reads and writes every byte (far past any cache).
src = torch.empty(128 * 2**20, dtype=torch.float32).fill_(1.0); dst = torch.empty_like(src)
copy_s = best(lambda: dst.copy_(src), 5)
out = {"bandwidth_gbs": 2 * src.numel() * 4 / copy_s / 1e9}
# Matmul FLOP/s at a decode step's shape (24 rows against SmolLM2's 576 x 1536 MLP) and a
# square one, float32 and bfloat16.
for dtype in ("float32", "bfloat16"):
    for rows, inner, cols in ((24, 576, 1536), (1024, 1024, 1024)):
        a = torch.randn(rows, inner).to(getattr(torch, dtype))
        b = torch.randn(inner, cols).to(getattr(torch, dtype))
        repeat = max(3, int(2e9 / (2 * rows * inner * cols)))
        seconds = best(lambda: [a @ b for _ in range(repeat)], 3) / repeat
        out[f"{dtype}_{rows}x{inner}x{cols}_gflops"] = 2 * rows * inner * cols / seconds / 1e9
out["threads"] = torch.get_num_threads()
print(json.dumps(out))
"""


def measure_machine(python: Path) -> dict[str, float]:
    """Memory bandwidth and matmul FLOP/s, measured with torch in the inference environment."""
    done = subprocess.run(
        [str(python), "-c", MACHINE_PROBE], capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def model_costs(model: Path) -> dict[str, float]:
    """Per decoded token: weight parameters read (all but the input embedding, of which one
    row is read), matmul FLOPs (2 per such parameter), and per token of context the KV
    cache values read and attention FLOPs."""
    config = json.loads((model / "config.json").read_text())
    manifest = read_tensor_manifest(model)
    parameters = sum(math.prod(info.shape) for info in manifest.values())
    embedding = math.prod(manifest["model.embed_tokens.weight"].shape)
    layers, hidden = config["num_hidden_layers"], config["hidden_size"]
    head_dim = hidden // config["num_attention_heads"]
    kv_width = config["num_key_value_heads"] * head_dim
    return {
        "parameters": parameters,
        "read_parameters": parameters - embedding,
        "kv_values_per_context_token": 2 * layers * kv_width,
        "attention_flops_per_context_token": 4 * layers * hidden,
    }


def roofline_tokens_s(
    costs: dict[str, float], machine: dict[str, float], dtype: str, batch: int, context: int
) -> float:
    """Output tokens/s no engine can beat on this machine: a decode step of `batch`
    sequences reads every weight once and each sequence's KV cache, and does 2 FLOPs per
    weight per sequence; it takes at least the longer of bytes / bandwidth and FLOPs /
    matmul rate (the measured rate of a large matmul in `dtype`: the machine's ceiling;
    decode-shaped ones run slower, which is the engine's loss, not the machine's)."""
    width = 4 if dtype == "float32" else 2
    step_bytes = width * (
        costs["read_parameters"] + batch * context * costs["kv_values_per_context_token"]
    )
    step_flops = batch * (
        2 * costs["read_parameters"] + context * costs["attention_flops_per_context_token"]
    )
    flops_s = machine[f"{dtype}_1024x1024x1024_gflops"] * 1e9  # the best matmul rate
    step_s = max(step_bytes / (machine["bandwidth_gbs"] * 1e9), step_flops / flops_s)
    return batch / step_s


async def chat_load(
    url: str, name: str, concurrency: int, requests: int, tokens: int, extra: dict[str, object]
) -> dict[str, float]:
    """`requests` streamed chat completions of `tokens` tokens, `concurrency` in flight:
    output tokens/s over the whole load, and the median time to the first token."""
    gate = asyncio.Semaphore(concurrency)
    body = {"model": name, "messages": CHAT, "max_tokens": tokens, "temperature": 0.0,
            "stream": True, **extra}  # fmt: skip
    first_token_s: list[float] = []
    produced: list[int] = []
    async with httpx.AsyncClient(base_url=url, timeout=1800) as client:

        async def request() -> None:
            async with gate:
                sent = time.perf_counter()
                first: float | None = None
                pieces = 0
                async with client.stream("POST", "/v1/chat/completions", json=body) as response:
                    response.raise_for_status()
                    async for line in response.aiter_lines():
                        if not line.startswith("data: ") or line == "data: [DONE]":
                            continue
                        chunk = json.loads(line[6:])
                        choices = chunk.get("choices") or [{}]
                        if choices[0].get("delta", {}).get("content"):
                            pieces += 1
                            first = first or time.perf_counter() - sent
                        if chunk.get("usage"):
                            pieces = chunk["usage"]["completion_tokens"]
                first_token_s.append(first or float("nan"))
                produced.append(pieces)

        started = time.perf_counter()
        await asyncio.gather(*(request() for _ in range(requests)))
        elapsed = time.perf_counter() - started
    return {"tokens_s": sum(produced) / elapsed, "ttft_s": statistics.median(first_token_s),
            "tokens": sum(produced) / len(produced)}  # fmt: skip


def measure_levels(
    url: str, name: str, levels: tuple[int, ...], tokens: int, extra: dict[str, object]
) -> dict[int, dict[str, float]]:
    asyncio.run(chat_load(url, name, 2, 2, 16, extra))  # warm-up
    results = {}
    for concurrency in levels:
        # At least 3 requests, so a lone stream is measured over more than one answer.
        results[concurrency] = asyncio.run(
            chat_load(url, name, concurrency, max(concurrency, 3), tokens, extra)
        )
        print(f"    {concurrency:>3} concurrent: {results[concurrency]}", flush=True)
    return results


def f32_gguf(source: Path, target: Path) -> Path:
    """The shipped GGUF's weights de-quantized to float32, its metadata unchanged (the
    `gguf` package, in the bench environment)."""
    script = r"""
import sys
import numpy as np
from gguf import GGUFReader, GGUFWriter, GGMLQuantizationType, GGUFValueType
from gguf.quants import dequantize
reader = GGUFReader(sys.argv[1])
arch = reader.fields["general.architecture"].contents()
writer = GGUFWriter(sys.argv[2], arch)
for field in reader.fields.values():
    if field.name.startswith("GGUF.") or field.name == "general.architecture":
        continue
    kind = field.types[0]
    if field.name == "general.file_type":
        writer.add_uint32(field.name, 0)  # ALL_F32
    elif kind == GGUFValueType.ARRAY:
        writer.add_array(field.name, field.contents())
    else:
        writer.add_key_value(field.name, field.contents(), kind)
for tensor in reader.tensors:
    data = dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
    shape = tuple(int(d) for d in reversed(tensor.shape.tolist()))
    writer.add_tensor(tensor.name, data.reshape(shape), raw_dtype=GGMLQuantizationType.F32)
writer.write_header_to_file(); writer.write_kv_data_to_file(); writer.write_tensors_to_file()
writer.close()
"""
    if not target.is_file():
        subprocess.run([str(BENCH_PYTHON), "-c", script, str(source), str(target)], check=True)
    return target


LLAMA_SERVER = """
import sys
import llama_cpp
import llama_cpp.llama

# llama.cpp's extra CPU buffer types (runtime repacking of Q4_1 into its AMX / AVX-512
# layouts) crash this build on the shipped Q4_1 file (segfault at the first decode, on
# this Sapphire Rapids CPU); plain CPU buffers run it. The f32 file never used them.
default_params = llama_cpp.llama_model_default_params


def without_extra_buffers():
    params = default_params()
    params.use_extra_bufts = False
    return params


llama_cpp.llama_model_default_params = without_extra_buffers
llama_cpp.llama.llama_cpp.llama_model_default_params = without_extra_buffers
from llama_cpp.server.__main__ import main

main()
"""


@contextmanager
def llama_cpp_server(gguf: Path, port: int, log: Path, threads: int) -> Iterator[str]:
    command = [str(BENCH_PYTHON), "-c", LLAMA_SERVER, "--model", str(gguf),
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048",
               "--n_threads", str(threads), "--n_threads_batch", str(threads),
               "--model_alias", "bench",
               # Queue concurrent requests (it runs one at a time) rather than cut the
               # running one short, its default.
               "--interrupt_requests", "False"]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with server(command, dict(os.environ), url, "/v1/models", log):
        yield url


@contextmanager
def cobalt_server(
    model: Path,
    dtype: str,
    log: Path,
    extra_args: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
    **settings: object,
) -> Iterator[str]:
    options = InferenceSettings(model=model, served_name="bench", dtype=dtype,
                                max_model_len=2048, startup_timeout_s=900, **settings)  # type: ignore[arg-type]  # fmt: skip
    child_env = {**os.environ, **(env or {})}
    with running_server(options, log, extra_args=extra_args, env=child_env) as url:
        yield url


def setting_trials(model: Path, work: Path, level: int, tokens: int) -> None:
    """The engine settings issue 32 names, each against the default in this run, at
    `level` requests in flight (the rule's dtype): one server start each."""
    cores = os.cpu_count() or 1
    trials: list[tuple[str, tuple[str, ...], dict[str, str], dict[str, object]]] = [
        ("default (vLLM binds its OpenMP threads to 1 core, reserves 1)", (), {}, {}),
        (f"threads: OpenMP on all {cores} cores, none reserved", (),
         {"VLLM_CPU_OMP_THREADS_BIND": f"0-{cores - 1}", "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"},
         {}),
        ("KV cache 4 GiB (default 1)", (), {}, {"cpu_kv_cache_gb": 4}),
        ("batch limit --max-num-seqs 8", ("--max-num-seqs", "8"), {}, {}),
        ("chunked prefill off", ("--no-enable-chunked-prefill",), {}, {}),
        ("prefix caching off", ("--no-enable-prefix-caching",), {}, {}),
    ]  # fmt: skip
    measured: list[tuple[str, dict[str, float]]] = []
    for number, (label, extra_args, env, settings) in enumerate(trials):
        log = work / f"trial-{number}.log"
        with cobalt_server(model, "auto", log, extra_args, env, **settings) as url:
            asyncio.run(chat_load(url, "bench", 2, 2, 16, {"ignore_eos": True}))  # warm-up
            result = asyncio.run(
                chat_load(url, "bench", level, level, tokens, {"ignore_eos": True})
            )
        print(f"    {label}: {result}", flush=True)
        measured.append((label, result))
    default = measured[0][1]["tokens_s"]
    print(
        f"\n| setting ({level} concurrent, {tokens} tokens) | output tok/s | TTFT s | vs default |"
    )
    print("|---|---|---|---|")
    for label, result in measured:
        print(f"| {label} | {result['tokens_s']:.0f} | {result['ttft_s']:.2f} | "
              f"{result['tokens_s'] / default:.2f} |")  # fmt: skip


PROFILE_CATEGORIES = (
    ("model forward", ("model_executor/models", "model_executor/layers", "attention/")),
    ("sampling", ("v1/sample",)),
    ("scheduler", ("core/sched",)),
    ("detokenization", ("detokenizer", "output_processor")),
    ("waiting for the other process", ("shm_broadcast", "get_response", "collective_rpc")),
    ("API: HTTP, streaming, asyncio", ("entrypoints", "uvicorn", "starlette", "asyncio")),
)
"""Where a py-spy stack's time goes: the first category any of its frames names."""


def server_processes(port: int) -> dict[str, int]:
    """The API server, engine core and worker of the vLLM listening on `port` (found by
    session, so another vLLM on this machine is never sampled)."""
    pids = [int(e.name) for e in Path("/proc").iterdir() if e.name.isdigit()]
    api = next(pid for pid in pids if f"--port\0{port}\0" in _cmdline(pid))
    session = os.getsid(api)
    roles = {"api": api}
    for pid in pids:
        try:
            if pid == api or os.getsid(pid) != session:
                continue
        except ProcessLookupError:
            continue
        title = _cmdline(pid)
        if "Worker" in title:
            roles["worker"] = pid
        elif "EngineCore" in title:
            roles["engine core"] = pid
    return roles


def _cmdline(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_text(errors="replace")
    except OSError:
        return ""


def engine_profile(url: str, log: Path, seconds: int, tokens: int) -> dict[str, float]:
    """Where the engine's time goes at 24 requests in flight: py-spy samples the worker
    (model forward, sampling), the engine core (scheduler) and the API server
    (detokenization, HTTP) for `seconds`; each figure is the share of that process's
    wall time (samples / (rate x seconds)), summed over its threads."""
    spy, rate = BENCH_PYTHON.parent / "py-spy", 50
    roles = server_processes(int(url.rsplit(":", 1)[1]))
    outputs = {role: log.with_name(f"pyspy-{role.replace(' ', '-')}.txt") for role in roles}
    spies = [subprocess.Popen([str(spy), "record", "--nonblocking", "--format", "raw",
                               "-r", str(rate), "-d", str(seconds), "-p", str(pid),
                               "-o", str(outputs[role])],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for role, pid in roles.items()]  # fmt: skip
    asyncio.run(chat_load(url, "bench", 24, 24, tokens, {"ignore_eos": True}))
    for spy_process in spies:
        spy_process.wait()
    shares: dict[str, float] = {}
    for role, path in outputs.items():
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not count_text.isdigit():
                continue
            label = next((name for name, keys in PROFILE_CATEGORIES
                          if any(key in stack for key in keys)), "other")  # fmt: skip
            key = f"{role}: {label}"
            shares[key] = shares.get(key, 0.0) + int(count_text) / (rate * seconds)
    return dict(sorted(shares.items()))


def limits(args: argparse.Namespace) -> None:
    """The `--limits` run: every server, one at a time, on the same model and load."""
    work = Path(tempfile.mkdtemp(prefix="cobalt-bench-limits-"))
    python = inference_python(InferenceSettings())
    model = args.model or InferenceSettings().model_dir()
    chosen = choose_cpu_dtype()
    other = "float32" if chosen.dtype == "bfloat16" else "bfloat16"
    levels = tuple(args.levels)
    machine = measure_machine(python)
    costs = model_costs(model)
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text()
                .splitlines() if line.startswith("model name")), "?")  # fmt: skip
    print(f"machine: {cpu}, {os.cpu_count()} CPUs; rule: {chosen.log_line()}")
    print(f"measured: {json.dumps(machine)}")
    print(f"model {model}: {costs['parameters'] / 1e6:.1f} M parameters "
          f"({costs['read_parameters'] / 1e6:.1f} M read per decode step)")  # fmt: skip
    context = 40 + args.answer_tokens // 2  # prompt with the chat template + half the answer
    results: dict[str, dict[int, dict[str, float]]] = {}
    no_chunking = ("--no-enable-chunked-prefill",)
    servers: list[tuple[str, str, object, tuple[str, ...]]] = [
        (f"cobalt serve, {chosen.dtype} (the rule's choice)", "cobalt", "auto", ()),
        (f"cobalt serve, {other}", "cobalt", other, ()),
        ("llama.cpp, the shipped GGUF", "llama", "shipped", ()),
        ("llama.cpp, f32 GGUF of the same weights", "llama", "f32", ()),
        (f"cobalt serve, {chosen.dtype}, chunked prefill off", "cobalt", "auto", no_chunking),
        (f"cobalt serve, {other}, chunked prefill off", "cobalt", other, no_chunking),
    ]
    servers = [entry for number, entry in enumerate(servers) if number in args.servers]
    if not BENCH_PYTHON.is_file() and any(kind == "llama" for _, kind, _, _ in servers):
        print(f"{BENCH_PYTHON} missing: llama.cpp rows skipped (bench/requirements-limits.txt)")
        servers = [entry for entry in servers if entry[1] != "llama"]
    profile: dict[str, float] = {}
    for label, kind, what, extra_args in servers:
        print(f"  {label}", flush=True)
        log = work / f"{len(results)}.log"
        if kind == "cobalt":
            with cobalt_server(model, str(what), log, extra_args) as url:
                results[label] = measure_levels(url, "bench", levels, args.answer_tokens,
                                                {"ignore_eos": True})  # fmt: skip
                if what == "auto" and not extra_args and args.profile_s:
                    profile = engine_profile(url, log, args.profile_s, args.answer_tokens)
        else:
            shipped = smollm2_gguf(python)
            gguf = shipped if what == "shipped" else f32_gguf(shipped, work / "smollm2-f32.gguf")
            label = label.replace("the shipped GGUF", shipped.name)
            # One core reserved, as vLLM's own thread binding does (the API server's).
            threads = max(1, (os.cpu_count() or 1) - 1)
            with llama_cpp_server(gguf, free_port(), log, threads) as url:
                # llama-cpp-python's server has no ignore_eos: <|endoftext|> and <|im_end|>
                # are biased away instead, so every answer runs to max_tokens as on vLLM.
                results[label] = measure_levels(url, "bench", levels, args.answer_tokens,
                                                {"logit_bias": {"0": -100, "2": -100}})  # fmt: skip
    for dtype in (chosen.dtype, other):
        results[f"roofline, {dtype}"] = {
            level: {"tokens_s": roofline_tokens_s(costs, machine, dtype, level, context),
                    "ttft_s": float("nan"), "tokens": args.answer_tokens}
            for level in levels
        }  # fmt: skip
    baseline = f"cobalt serve, {chosen.dtype} (the rule's choice)"
    if baseline not in results:
        baseline = next(iter(results))
    print()
    print("| server | " + " | ".join(f"{c} conc. tok/s (TTFT s)" for c in levels) + " |")
    print("|---|" + "---|" * len(levels))
    for label, by_level in results.items():
        cells = [f"{by_level[c]['tokens_s']:.0f}" + ("" if math.isnan(by_level[c]["ttft_s"])
                 else f" ({by_level[c]['ttft_s']:.2f})") for c in levels]  # fmt: skip
        print(f"| {label} | " + " | ".join(cells) + " |")
    print()
    print("| ratio of the rule's choice to | " + " | ".join(f"{c} conc." for c in levels) + " |")
    print("|---|" + "---|" * len(levels))
    for label, by_level in results.items():
        if label == baseline:
            continue
        cells = [f"{results[baseline][c]['tokens_s'] / by_level[c]['tokens_s']:.2f}"
                 for c in levels]  # fmt: skip
        print(f"| {label} | " + " | ".join(cells) + " |")
    if profile:
        print("\nengine profile at 24 concurrent (py-spy; share of each process's wall time):")
        for label, share in profile.items():
            print(f"  {label}: {100 * share:.1f} %")
    print(f"logs in {work}")


def smollm2_gguf(python: Path) -> Path:
    probe = "from cobalt.inference.models import smollm2_gguf_path as p; print(p())"
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, check=True)
    return Path(done.stdout.strip())


if __name__ == "__main__":
    main()
