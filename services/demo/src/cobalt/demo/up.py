"""`cobalt up`: the deployment shape on one machine, as supervised child processes.

The same services as docker-compose.yml and k8s/ (executor, inference, orchestrator API,
rollout workers, trainer), each started through the `cobalt` command with the user's
`COBALT_*` settings. PostgreSQL and Redis are used when configured, never started: this is
for machines that have them (or for SQLite and in-process jobs, the embedded default).
A service that exits is started again, as compose's `restart:` and a Deployment would
(`RestartPolicy`: after 1 s, doubling to 30 s; the trainer only when it failed, since
exiting 0 means its job is done); one that keeps exiting (5 times in 10 minutes: a bad
setting, a port taken) stops them all, and the exit names it. Ctrl-C stops them all.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from cobalt.demo.launch import (
    cobalt_command,
    executor_process,
    orchestrator_process,
    trainer_process,
    worker_process,
)
from cobalt.demo.processes import ChildProcess, port_is_free
from cobalt.executor.settings import ExecutorSettings
from cobalt.inference.settings import InferenceSettings
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.carrier import queue_carrier
from cobalt.shared.errors import first_validation_error

__all__ = ["RestartPolicy", "UpPlan", "run_up"]

READY_TIMEOUT_S = 120.0
INFERENCE_READY_TIMEOUT_S = 900.0
"""vLLM on CPU takes 40-130 s, and a first start also converts the default model."""
POLL_INTERVAL_S = 1.0


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """When `cobalt up` starts an exited service again, and when it gives up."""

    allowed: int = 5
    """Restarts of one service within `window_s`; one more exit stops everything."""
    window_s: float = 600.0
    first_delay_s: float = 1.0
    """Wait before the first restart, doubled for each restart in the window."""
    max_delay_s: float = 30.0


@dataclass
class UpPlan:
    """The children to start, in order, and where they will answer."""

    children: list[ChildProcess]
    urls: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_environment(
        cls,
        *,
        workers: int,
        train_job: int | None,
        inference: bool,
        log_dir: Path,
        env: dict[str, str] | None = None,
    ) -> UpPlan:
        """The plan for this machine's `COBALT_*` settings.

        Raises:
            ValueError: a setting or option combination cannot work; the message says why.
        """
        env = dict(os.environ if env is None else env)
        try:
            orchestrator = OrchestratorSettings()
            executor = ExecutorSettings()
            served = InferenceSettings()
        except ValidationError as exc:
            raise ValueError(f"bad COBALT_* setting {first_validation_error(exc)}") from exc
        queued = queue_carrier(orchestrator) is not None
        if workers and not queued:
            raise ValueError(
                "--workers needs COBALT_REDIS_URL: without Redis the orchestrator runs "
                "rollouts in its own threads and there is no queue for workers"
            )
        ports = {
            "executor": (executor.port, "COBALT_EXECUTOR_PORT"),
            "orchestrator": (orchestrator.orchestrator_port, "COBALT_ORCHESTRATOR_PORT"),
        }
        if inference:
            ports["inference"] = (served.port, "COBALT_INFERENCE_PORT")
        for name, (port, variable) in ports.items():
            if not port_is_free(port):
                raise ValueError(f"port {port} of the {name} is in use; set {variable}")
        urls = {
            "executor": f"http://{executor.host}:{executor.port}",
            "orchestrator": f"http://{orchestrator.orchestrator_host}:"
            f"{orchestrator.orchestrator_port}",
        }
        if inference:
            urls["inference"] = f"http://{served.host}:{served.port}"
        # Services find each other through the variables their clients read.
        env.setdefault("COBALT_EXECUTOR_URL", urls["executor"])
        env.setdefault("COBALT_TRAINER_ORCHESTRATOR_URL", urls["orchestrator"])
        if orchestrator.orchestrator_write_token is not None:
            token = orchestrator.orchestrator_write_token.get_secret_value()
            env.setdefault("COBALT_TRAINER_ORCHESTRATOR_TOKEN", token)
        if inference:
            env.setdefault("COBALT_TRAINER_INFERENCE_URL", urls["inference"])
        children = [
            executor_process(host=executor.host, port=executor.port, log_dir=log_dir, env=env),
            orchestrator_process(
                host=orchestrator.orchestrator_host,
                port=orchestrator.orchestrator_port,
                log_dir=log_dir,
                env=env,
            ),
        ]
        if inference:
            children.append(_inference_process(served, log_dir, env))
        children += [worker_process(index=i + 1, log_dir=log_dir, env=env) for i in range(workers)]
        notes = [f"database: {orchestrator.database_url.split('@')[-1]}"]
        notes.append(
            f"rollouts: {workers} RQ workers on Redis"
            if queued
            else "rollouts: threads of the orchestrator (no COBALT_REDIS_URL)"
        )
        if train_job is not None:
            children.append(trainer_process(job_id=train_job, log_dir=log_dir, env=env))
        return cls(children=children, urls=urls, notes=notes)


def _inference_process(
    served: InferenceSettings, log_dir: Path, env: dict[str, str]
) -> ChildProcess:
    # Through `cobalt inference serve` without options: it reads COBALT_INFERENCE_* and
    # prepares the default model on first use, as in deployment.
    return ChildProcess(
        name="inference server (vLLM)",
        command=[*cobalt_command(), "inference", "serve"],
        log_path=log_dir / "inference.log",
        env=env,
        ready_url=f"http://{served.host}:{served.port}/ready",
    )


def run_up(plan: UpPlan, say: Callable[[str], None]) -> None:
    """Start every child, wait until each is ready, then watch them until one exits.

    Raises:
        DemoFailed: a service did not start or exited; the others are stopped first.
        KeyboardInterrupt: Ctrl-C (or SIGTERM); the children are stopped first.
    """
    started: list[ChildProcess] = []
    # Services (those with a readiness URL) start together; their clients (workers, the
    # trainer) only once every service is ready: a worker checks the executor when it
    # starts and exits if it cannot reach it.
    services = [child for child in plan.children if child.ready_url is not None]
    clients = [child for child in plan.children if child.ready_url is None]
    try:
        for batch in (services, clients):
            for child in batch:
                child.start()
                started.append(child)
            for child in batch:
                timeout = INFERENCE_READY_TIMEOUT_S if "vLLM" in child.name else READY_TIMEOUT_S
                seconds = child.wait_ready(timeout)
                say(f"{child.name} ready ({seconds:.0f} s; log {child.log_path})")
        for name, url in plan.urls.items():
            say(f"{name}: {url}")
        for note in plan.notes:
            say(note)
        if "orchestrator" in plan.urls:
            say(f"web UI: {plan.urls['orchestrator']}/ui/   (Ctrl-C stops everything)")
        _watch(plan.children, say)
    finally:
        for child in reversed(started):
            child.stop()


def _watch(
    children: list[ChildProcess],
    say: Callable[[str], None],
    policy: RestartPolicy = RestartPolicy(),
    stop: threading.Event | None = None,
) -> None:
    """Watch the services until `stop` is set (never, from `run_up`): start each one that
    exited again after the policy's delay (a trainer that finished its job, exit 0, is
    left alone); raise once one has exited more often than the policy allows."""
    stop = stop or threading.Event()
    restarts: dict[str, list[float]] = {}
    """Service -> when it was restarted, within the window."""
    due: dict[str, float] = {}
    """Service -> when it is started again."""
    trainer_done = False
    while not stop.is_set():
        now = time.monotonic()
        for child in children:
            if child.is_running():
                continue
            if child.name == "trainer" and child.returncode == 0:
                if not trainer_done:
                    say("the trainer finished its job; the other services keep running")
                    trainer_done = True
                continue
            if child.name in due:
                if now >= due[child.name]:
                    del due[child.name]
                    child.start()
                    say(f"the {child.name} started again")
                continue
            recent = [t for t in restarts.get(child.name, []) if now - t < policy.window_s]
            if len(recent) >= policy.allowed:
                raise child.failure(
                    f"exited with code {child.returncode} again, after {len(recent)} restarts "
                    f"within {policy.window_s:.0f} s; not restarted"
                )
            delay = min(policy.first_delay_s * 2 ** len(recent), policy.max_delay_s)
            restarts[child.name] = [*recent, now]
            due[child.name] = now + delay
            say(
                f"the {child.name} exited with code {child.returncode}; starting it again in "
                f"{delay:g} s (log {child.log_path})"
            )
        stop.wait(POLL_INTERVAL_S)
