"""Sampling chat completions from any OpenAI-compatible endpoint, for rollouts.

One `ChatSampler` per endpoint wraps the official async `openai` client (its retries with
exponential backoff cover connection errors, 408, 409, 429 and 5xx). What comes back is a
`Sample` per choice with everything a turn row stores: the text, the token ids of prompt
and completion and the sampled tokens' logprobs when the endpoint is vLLM (so training
never re-tokenizes), token counts, latency, the model and the policy version header of
Cobalt's inference service.

Failures arrive as the shared error tree: `Unavailable` when the endpoint cannot be
reached after the retries, `InvalidInput` for a request the endpoint rejects (unknown
model, prompt too long), `UpstreamError` for anything else. Never an empty sample.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import openai

from cobalt.shared import defaults
from cobalt.shared.clients.inference import ModelEndpoint, policy_version_of
from cobalt.shared.contracts.sampling import SamplingSettings
from cobalt.shared.errors import InvalidInput, Unavailable, UpstreamError
from cobalt.shared.extraction import answer_part, fenced_blocks

__all__ = ["CODE_END", "ChatSampler", "Sample", "SamplingParams", "openai_client_for"]

MAX_RETRIES = 4
"""Attempts after the first, with the openai client's exponential backoff."""
TIMEOUT_S = 900.0
"""A long reasoning answer from a busy server can take minutes."""


_SETTINGS = set(SamplingSettings.model_fields)

CODE_END = "\n```\n"
"""The stop sequence of `stop_at_code_end`: a fence line after code. An opening fence
is tagged (```` ```python ````) or starts the answer, so it does not end an answer; an
untagged block opened after a line of prose would (the reward's python-fence rule fails
such an answer anyway)."""


def _with_code_end(text: str, finish_reason: str | None, stop_reason: object) -> str:
    """`text` with the closing fence the stop sequence matched, where the endpoint left it
    out (vLLM keeps it: include_stop_str_in_output; other endpoints drop a stop string).

    vLLM names the stop that matched (`stop_reason`). Other endpoints say only "stop", for
    a stop sequence and an end-of-text token alike: an answer that stopped inside an open
    block is taken as cut by ours (a model seldom ends mid-block by itself; if it did, the
    fence closes its last block)."""
    if finish_reason != "stop" or text.endswith(CODE_END):
        return text
    if stop_reason == CODE_END or (stop_reason is None and _ends_in_open_block(text)):
        return text + CODE_END
    return text


def _ends_in_open_block(text: str) -> bool:
    blocks = fenced_blocks(answer_part(text))
    return bool(blocks) and not blocks[-1].is_closed


@dataclass(frozen=True, slots=True)
class SamplingParams:
    """Decoding settings of one request (paper defaults: 0.6, 0.95, long max_tokens)."""

    n: int = 1
    temperature: float = defaults.TEMPERATURE
    top_p: float = defaults.TOP_P
    max_tokens: int = 4096
    seed: int | None = None
    stop_at_code_end: bool = False

    @classmethod
    def of(cls, settings: SamplingSettings, *, n: int = 1, max_tokens: int) -> SamplingParams:
        """A run's or a training job's sampling settings for requests of `n` choices of at
        most `max_tokens` tokens (every `SamplingSettings` field is one of ours)."""
        return cls(n=n, max_tokens=max_tokens, **settings.model_dump(include=_SETTINGS))


@dataclass(frozen=True, slots=True)
class Sample:
    """One choice of a chat completion, with what training and analysis need."""

    text: str
    finish_reason: str | None
    prompt_token_ids: list[int] | None
    completion_token_ids: list[int] | None
    completion_logprobs: list[float] | None
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    model: str
    policy_version: int | None


def _choice_logprobs(choice: dict[str, Any]) -> list[float] | None:
    content = (choice.get("logprobs") or {}).get("content")
    if not content:
        return None
    return [float(entry["logprob"]) for entry in content]


def openai_client_for(
    endpoint: ModelEndpoint, *, max_retries: int = MAX_RETRIES, timeout_s: float = TIMEOUT_S
) -> openai.AsyncOpenAI:
    """The async openai client a `ChatSampler` of `endpoint` uses (the caller closes it)."""
    settings = endpoint.openai_kwargs()
    return openai.AsyncOpenAI(
        base_url=settings["base_url"],
        api_key=settings["api_key"],
        max_retries=max_retries,
        timeout=timeout_s,
    )


class ChatSampler:
    """Samples chat completions from one endpoint. Safe to share between coroutines.

    Builds its own openai client, or uses an injected one that the caller keeps owning
    (`aclose` then leaves it open): rollout jobs share one per endpoint per process.
    """

    def __init__(
        self,
        endpoint: ModelEndpoint,
        *,
        max_retries: int = MAX_RETRIES,
        timeout_s: float = TIMEOUT_S,
        client: openai.AsyncOpenAI | None = None,
    ) -> None:
        self.endpoint = endpoint
        self._owns_client = client is None
        self._client = client or openai_client_for(
            endpoint, max_retries=max_retries, timeout_s=timeout_s
        )

    async def aclose(self) -> None:
        if self._owns_client:
            await self._client.close()

    async def sample(self, messages: list[dict[str, str]], params: SamplingParams) -> list[Sample]:
        """`params.n` samples for one conversation, in choice order."""
        extra: dict[str, Any] = dict(self.endpoint.extra_body())
        if params.stop_at_code_end and self.endpoint.vllm_extensions:
            extra["include_stop_str_in_output"] = True
        started = time.perf_counter()
        try:
            raw = await self._client.chat.completions.with_raw_response.create(
                model=self.endpoint.model,
                messages=messages,  # type: ignore[arg-type]
                n=params.n,
                temperature=params.temperature,
                top_p=params.top_p,
                max_tokens=params.max_tokens,
                # omit, not null: strict providers reject fields they do not know.
                seed=params.seed if params.seed is not None else openai.omit,
                stop=[CODE_END] if params.stop_at_code_end else openai.omit,
                logprobs=True if self.endpoint.vllm_extensions else openai.omit,
                extra_body=extra or None,
            )
        except openai.APIConnectionError as exc:  # includes timeouts, after the retries
            raise Unavailable(
                f"cannot reach the model endpoint {self.endpoint.base_url} "
                f"({type(exc).__name__}: {exc}); check that it is running and the URL is right"
            ) from exc
        except openai.APIStatusError as exc:
            message = (
                f"model endpoint {self.endpoint.base_url} answered {exc.status_code}: {exc.message}"
            )
            if exc.status_code in (400, 404, 422):
                raise InvalidInput(message) from exc
            raise UpstreamError(message, status_code=exc.status_code) from exc
        latency_ms = (time.perf_counter() - started) * 1000
        body = json.loads(raw.text)
        version = policy_version_of(raw.headers)
        choices = sorted(body.get("choices") or [], key=lambda c: c.get("index", 0))
        if len(choices) != params.n:
            raise UpstreamError(
                f"model endpoint {self.endpoint.base_url} returned {len(choices)} choices "
                f"for n={params.n}"
            )
        usage = body.get("usage") or {}
        prompt_ids = body.get("prompt_token_ids")
        samples = []
        for choice in choices:
            token_ids = choice.get("token_ids")
            text = (choice.get("message") or {}).get("content") or ""
            if params.stop_at_code_end:
                text = _with_code_end(text, choice.get("finish_reason"), choice.get("stop_reason"))
            samples.append(
                Sample(
                    text=text,
                    finish_reason=choice.get("finish_reason"),
                    prompt_token_ids=list(prompt_ids) if prompt_ids is not None else None,
                    completion_token_ids=list(token_ids) if token_ids is not None else None,
                    completion_logprobs=_choice_logprobs(choice),
                    prompt_tokens=int(usage.get("prompt_tokens") or 0),
                    completion_tokens=(
                        len(token_ids)
                        if token_ids is not None
                        else int(usage.get("completion_tokens") or 0) // max(1, params.n)
                    ),
                    latency_ms=latency_ms,
                    model=str(body.get("model") or self.endpoint.model),
                    policy_version=version,
                )
            )
        return samples
