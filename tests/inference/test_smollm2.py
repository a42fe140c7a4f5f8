"""Smoke test on the real default model: SmolLM2-135M-Instruct, converted from its GGUF file.

The conversion lands in the user's model cache (~/.cache/cobalt/models), so it runs once
per machine; the server start costs about a minute. `make test` runs it.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from cobalt.inference.launcher import inference_python, running_server
from cobalt.inference.settings import InferenceSettings
from cobalt.shared.contracts.inference import POLICY_VERSION_HEADER

pytestmark = pytest.mark.slow

NAME = "smollm2"


@pytest.fixture(scope="module")
def smollm2_dir() -> Path:
    settings = InferenceSettings()
    subprocess.run(
        [str(inference_python(settings)), "-m", "cobalt.inference.cli", "prepare-model"],
        check=True,
        timeout=600,
    )
    return settings.model_dir()


@pytest.fixture(scope="module")
def smollm2_url(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = InferenceSettings(
        model=smollm2_dir, served_name=NAME, max_model_len=2048, startup_timeout_s=400
    )
    with running_server(settings, tmp_path_factory.mktemp("logs") / "smollm2.log") as url:
        yield url


def test_prepared_model_is_untied_safetensors(smollm2_dir: Path) -> None:
    config = json.loads((smollm2_dir / "config.json").read_text())
    assert config["tie_word_embeddings"] is False
    assert config["model_type"] == "llama"
    assert list(smollm2_dir.glob("*.safetensors"))
    assert (smollm2_dir / "tokenizer.json").is_file()
    assert json.loads((smollm2_dir / "cobalt-policy.json").read_text())["version"] == 0


def test_smollm2_writes_python(smollm2_url: str) -> None:
    with openai.OpenAI(base_url=f"{smollm2_url}/v1", api_key="unused", max_retries=0) as client:
        raw = client.chat.completions.with_raw_response.create(
            model=NAME,
            messages=[
                {
                    "role": "user",
                    "content": "Write a Python function add(a, b) that returns the sum of a and b.",
                }
            ],
            temperature=0,
            max_tokens=120,
            logprobs=True,
            extra_body={"return_token_ids": True},
        )
    completion = raw.parse()
    text = completion.choices[0].message.content or ""
    assert "def add" in text, text
    assert raw.headers[POLICY_VERSION_HEADER] == "0"
    entries = completion.choices[0].logprobs.content  # type: ignore[union-attr]
    assert entries and all(math.isfinite(e.logprob) and e.logprob <= 0 for e in entries)
    assert len(json.loads(raw.text)["choices"][0]["token_ids"]) == len(entries)


def test_reloading_the_same_weights_changes_nothing(smollm2_url: str, smollm2_dir: Path) -> None:
    def first_token_logprob() -> float:
        response = httpx.post(
            f"{smollm2_url}/v1/completions",
            json={
                "model": NAME,
                "prompt": "def fib(n):",
                "max_tokens": 1,
                "temperature": 0,
                "logprobs": 1,
            },
            timeout=60,
        ).json()
        value: float = response["choices"][0]["logprobs"]["token_logprobs"][0]
        return value

    before = first_token_logprob()
    loaded = httpx.post(
        f"{smollm2_url}/v1/policy/weights",
        json={"path": str(smollm2_dir), "version": 1},
        timeout=300,
    )
    assert loaded.status_code == 200, loaded.text
    assert first_token_logprob() == pytest.approx(before, abs=1e-3)
