"""ChatSampler against the deterministic fake server: shapes, n, and every failure mode."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from cobalt.orchestrator.rollouts.sampling import CODE_END, ChatSampler, SamplingParams
from cobalt.shared.clients.inference import ModelEndpoint
from cobalt.shared.errors import InvalidInput, Unavailable, UpstreamError
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai

MESSAGES = [{"role": "user", "content": "add two numbers"}]


def answer(messages: list[dict[str, Any]], index: int) -> str:
    return f"answer {index} to {messages[-1]['content']}"


@pytest.fixture
def fake() -> Iterator[tuple[FakeOpenAI, str]]:
    server = FakeOpenAI(responder=answer)
    with serve_fake_openai(server) as url:
        yield server, url


def sample(url: str, params: SamplingParams, **endpoint: Any) -> list[Any]:
    async def go() -> list[Any]:
        sampler = ChatSampler(
            ModelEndpoint(base_url=url, model=endpoint.pop("model", "fake-model"), **endpoint),
            max_retries=1,
            timeout_s=10,
        )
        try:
            return await sampler.sample(MESSAGES, params)
        finally:
            await sampler.aclose()

    return asyncio.run(go())


def test_n_samples_with_token_ids_logprobs_and_version(fake: tuple[FakeOpenAI, str]) -> None:
    server, url = fake
    samples = sample(url, SamplingParams(n=3, temperature=0.6, top_p=0.95, max_tokens=100))
    assert [s.text for s in samples] == [answer(MESSAGES, i) for i in range(3)]
    for s in samples:
        assert s.completion_token_ids is not None and len(s.completion_token_ids) == len(s.text)
        assert s.completion_logprobs == [-0.5] * len(s.text)
        assert s.completion_tokens == len(s.text)
        assert s.prompt_token_ids is not None and s.prompt_tokens == len(s.prompt_token_ids)
        assert s.policy_version == 7 and s.model == "fake-model"
    request = server.requests[-1]
    assert (request["n"], request["temperature"], request["top_p"]) == (3, 0.6, 0.95)
    assert request["return_token_ids"] is True


def test_plain_openai_endpoints_get_no_vllm_fields(fake: tuple[FakeOpenAI, str]) -> None:
    server, url = fake
    (only,) = sample(url, SamplingParams(), vllm_extensions=False)
    assert "return_token_ids" not in server.requests[-1]
    assert "logprobs" not in server.requests[-1]
    assert only.completion_token_ids is None and only.completion_logprobs is None
    assert only.completion_tokens == len(only.text)


def test_rejected_request_is_invalid_input(fake: tuple[FakeOpenAI, str]) -> None:
    _, url = fake
    with pytest.raises(InvalidInput, match="does not exist"):
        sample(url, SamplingParams(), model="other")


def test_server_errors_are_retried_then_reported(fake: tuple[FakeOpenAI, str]) -> None:
    server, url = fake
    server.fail_next = [503]
    assert len(sample(url, SamplingParams())) == 1  # one retry absorbs one failure
    server.fail_next = [500, 500, 500]
    with pytest.raises(UpstreamError, match="injected 500"):
        sample(url, SamplingParams())


def test_unreachable_endpoint_is_unavailable() -> None:
    with pytest.raises(Unavailable, match="cannot reach the model endpoint"):
        sample("http://127.0.0.1:9/v1", SamplingParams())


CODE = "```python\ndef add(a, b):\n    return a + b\n```"
CHATTY = [
    f"{CODE}\nThis function adds a and b.\n```python\nprint(add(1, 2))\n```",
    f"Here is the function:\n{CODE}\n\nExplanation: it returns the sum.",
    f"{CODE}\n",
    f"{CODE}",
]


@pytest.mark.parametrize("strict", [False, True], ids=["vllm", "plain-openai"])
def test_stop_at_code_end_keeps_the_closing_fence(strict: bool) -> None:
    """The answer ends at its code block's closing fence, and what is stored still passes
    the reward's format rules, also where the endpoint drops the stop string."""
    from cobalt.shared.reward.rules import check_format

    server = FakeOpenAI(responder=lambda messages, index: CHATTY[index], strict=strict)
    with serve_fake_openai(server) as url:
        params = SamplingParams(n=len(CHATTY), stop_at_code_end=True)
        samples = sample(url, params, vllm_extensions=not strict)
        request = server.requests[-1]
        assert request["stop"] == [CODE_END]
        assert request.get("include_stop_str_in_output", False) is (not strict)
        for text in (s.text for s in samples):
            assert text.startswith(("```python", "Here is")) and "Explanation" not in text
            assert "print(add" not in text and text.rstrip().endswith("```")
            read = check_format(text)
            assert read.program is not None and "return a + b" in read.program
            assert read.python_fence_ok and not read.backticks_in_code
        assert samples[-1].text == CHATTY[-1]  # ended by itself after the fence: as it was
        sample(url, SamplingParams(n=1), vllm_extensions=not strict)
        assert "stop" not in server.requests[-1]
