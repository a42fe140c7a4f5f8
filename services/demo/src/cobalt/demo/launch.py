"""The command line and environment of each Cobalt service as a child process.

`cobalt demo` and `cobalt up` start the services exactly as a user would, through the
`cobalt` command, so what they run is what the docs describe. Settings travel as the
services' own `COBALT_*` variables.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from cobalt.demo.processes import ChildProcess
from cobalt.inference.launcher import inference_python
from cobalt.inference.settings import InferenceSettings

__all__ = [
    "cobalt_command",
    "executor_process",
    "inference_process",
    "orchestrator_process",
    "trainer_process",
    "worker_process",
]


def cobalt_command() -> list[str]:
    """The `cobalt` console script of this environment (or the module, if not installed)."""
    script = Path(sys.executable).parent / "cobalt"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from cobalt.shared.commands import main; main()"]


def executor_process(
    *, host: str, port: int, log_dir: Path, env: Mapping[str, str]
) -> ChildProcess:
    """`cobalt executor serve`; ready when `/readyz` has run its canary in a sandbox."""
    return ChildProcess(
        name="executor",
        command=[*cobalt_command(), "executor", "serve", "--host", host, "--port", str(port)],
        log_path=log_dir / "executor.log",
        env=dict(env),
        ready_url=f"http://{host}:{port}/readyz",
    )


def orchestrator_process(
    *, host: str, port: int, log_dir: Path, env: Mapping[str, str]
) -> ChildProcess:
    """`cobalt orchestrator serve` (REST API, training rounds, web UI at /ui)."""
    return ChildProcess(
        name="orchestrator API",
        command=[*cobalt_command(), "orchestrator", "serve", "--host", host, "--port", str(port)],
        log_path=log_dir / "orchestrator.log",
        env=dict(env),
        ready_url=f"http://{host}:{port}/healthz",
    )


def inference_process(
    *,
    model_dir: Path,
    served_name: str,
    host: str,
    port: int,
    log_dir: Path,
    env: Mapping[str, str],
    max_model_len: int | None = None,
) -> ChildProcess:
    """`cobalt inference serve` run directly in the inference environment's interpreter
    (so no extra `cobalt` process sits between the supervisor and vLLM)."""
    python = inference_python(InferenceSettings())
    command = [str(python), "-m", "cobalt.inference.cli", "serve", "--model", str(model_dir)]
    command += ["--served-name", served_name, "--host", host, "--port", str(port)]
    if max_model_len is not None:
        command += ["--max-model-len", str(max_model_len)]
    return ChildProcess(
        name="inference server (vLLM)",
        command=command,
        log_path=log_dir / "inference.log",
        env=dict(env),
        ready_url=f"http://{host}:{port}/ready",
    )


def trainer_process(
    *, job_id: int, log_dir: Path, env: Mapping[str, str], log_name: str = "trainer.log"
) -> ChildProcess:
    """`cobalt trainer serve --job ID` (it re-executes itself in .venv-trainer); it trains
    until the job's budget is spent or the job is stopped."""
    command = [*cobalt_command(), "trainer", "serve", "--job", str(job_id)]
    return ChildProcess(name="trainer", command=command, log_path=log_dir / log_name, env=dict(env))


def worker_process(*, index: int, log_dir: Path, env: Mapping[str, str]) -> ChildProcess:
    """One `cobalt worker` (RQ) taking rollout jobs from Redis."""
    return ChildProcess(
        name=f"worker {index}",
        command=[*cobalt_command(), "worker"],
        log_path=log_dir / f"worker-{index}.log",
        env=dict(env),
    )
