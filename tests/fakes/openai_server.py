"""A deterministic OpenAI-compatible chat server for testing Cobalt's own loop logic.

It answers `/v1/chat/completions` with text chosen by a Python function of the request's
messages (the test decides what the "model" writes at each turn), in vLLM's response
shape: `prompt_token_ids`, per-choice `token_ids` and logprobs, usage, and the
`x-cobalt-policy-version` header, and says it is vLLM (`owned_by: "vllm"`). It can fail on
purpose (`fail_next`) and be slow (`delay_s`). Like Cobalt's inference service it answers
the control path's `GET /v1/policy` and loads (`POST /v1/policy/weights` or `/adapter`:
the version moves to the one loaded, no weights are read), so a trainer can publish to it;
`mark_version` writes each response's version into its text, so a test can tell from a
stored response which policy sampled it. With `strict`, it is a provider that knows
only OpenAI's request fields: it answers 400 to any other (as OpenAI does to
`return_token_ids`) and does not claim to be vLLM. It measures our code in isolation; the
real vLLM path has its own tests.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

OPENAI_FIELDS = frozenset(
    {
        "model", "messages", "n", "temperature", "top_p", "max_tokens",
        "max_completion_tokens", "seed", "logprobs", "top_logprobs", "stop", "stream",
        "stream_options", "user", "presence_penalty", "frequency_penalty", "logit_bias",
        "response_format", "tools", "tool_choice", "parallel_tool_calls", "metadata",
        "store", "reasoning_effort", "service_tier", "modalities", "prediction", "audio",
    }
)  # fmt: skip
"""The chat completion request fields of OpenAI's API (what a strict provider accepts)."""

Responder = Callable[[list[dict[str, Any]], int], str]
"""(messages, choice index) -> the assistant's text."""


def _token_ids(text: str) -> list[int]:
    # One fake token per character keeps lengths easy to reason about in tests.
    return [ord(ch) % 50000 for ch in text]


@dataclass
class FakeOpenAI:
    responder: Responder
    model: str = "fake-model"
    policy_version: int = 7
    delay_s: float = 0.0
    delay_after: int = 0
    """`delay_s` applies to requests after this many (a test that must catch a call in
    flight sets both before the run starts: setting the delay afterwards races a fast run)."""
    fail_next: list[int] = field(default_factory=list)
    """HTTP statuses to answer the next requests with, one per request, before succeeding."""
    requests: list[dict[str, Any]] = field(default_factory=list)
    strict: bool = False
    """Reject request fields OpenAI's API does not have (400), and not claim to be vLLM."""
    mark_version: bool = False
    """End every choice's text with `# policy version N`, N the version of its header."""
    loads: list[int] = field(default_factory=list)
    """The versions loaded through the control path, in order."""
    weights: dict[str, Any] | None = None
    """What `GET /v1/policy` reports as the serving weights (a `WeightsIdentity`)."""

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.get("/v1/models")
        async def models() -> dict[str, Any]:
            owner = "system" if self.strict else "vllm"
            card = {"id": self.model, "object": "model", "owned_by": owner}
            return {"object": "list", "data": [card]}

        @app.get("/v1/policy")
        async def policy() -> dict[str, Any]:
            return self._policy_status()

        @app.post("/v1/policy/weights")
        @app.post("/v1/policy/adapter")
        async def load(request: Request) -> JSONResponse:
            body = await request.json()
            version = body.get("version")
            version = self.policy_version + 1 if version is None else int(version)
            if version <= self.policy_version:
                message = f"version {version} does not exceed the serving {self.policy_version}"
                error = {"type": "Conflict", "message": message, "detail": None}
                return JSONResponse({"error": error}, status_code=409)
            self.policy_version = version
            self.loads.append(version)
            loaded = {"version": version, "path": body["path"], "load_s": 0.0, "drain_s": 0.0}
            return JSONResponse(loaded)

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            self.requests.append(body)
            # One version per request, from its arrival: a load meanwhile does not change it
            # (the real service drains requests in flight before it loads).
            version = self.policy_version
            headers = {"x-cobalt-policy-version": str(version)}
            unknown = sorted(set(body) - OPENAI_FIELDS) if self.strict else []
            if unknown:
                message = f"Unrecognized request argument supplied: {', '.join(unknown)}"
                error = {"message": message, "type": "invalid_request_error", "code": None}
                return JSONResponse({"error": error}, status_code=400)
            if self.fail_next:
                status = self.fail_next.pop(0)
                return JSONResponse(
                    {"error": {"message": f"injected {status}", "type": "x", "code": status}},
                    status_code=status,
                    headers=headers,
                )
            if body.get("model") != self.model:
                return JSONResponse(
                    {
                        "error": {
                            "message": f"The model `{body.get('model')}` does not exist.",
                            "type": "NotFoundError",
                            "code": 404,
                        }
                    },
                    status_code=404,
                )
            if self.delay_s and len(self.requests) > self.delay_after:
                await asyncio.sleep(self.delay_s)
            messages = body["messages"]
            prompt_ids = _token_ids("".join(m["content"] for m in messages))
            choices: list[dict[str, Any]] = []
            for index in range(int(body.get("n") or 1)):
                text = self.responder(messages, index)
                if self.mark_version:
                    text += f"\n# policy version {version}"
                text, stop_reason = _cut_at_stop(text, body)
                ids = _token_ids(text)[: int(body.get("max_tokens") or 10**9)]
                text = text[: len(ids)]
                choices.append(
                    {
                        "index": index,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                        "stop_reason": stop_reason if not self.strict else None,
                        "logprobs": {
                            "content": [
                                {"token": ch, "logprob": -0.5, "bytes": None, "top_logprobs": []}
                                for ch in text
                            ]
                        }
                        if body.get("logprobs")
                        else None,
                        "token_ids": ids if body.get("return_token_ids") else None,
                    }
                )
            completion_tokens = sum(len(c["message"]["content"]) for c in choices)
            return JSONResponse(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": self.model,
                    "choices": choices,
                    "prompt_token_ids": prompt_ids if body.get("return_token_ids") else None,
                    "usage": {
                        "prompt_tokens": len(prompt_ids),
                        "completion_tokens": completion_tokens,
                        "total_tokens": len(prompt_ids) + completion_tokens,
                    },
                },
                headers=headers,
            )

        return app

    def _policy_status(self) -> dict[str, Any]:
        """The control path's status (`PolicyStatus`) of what this fake serves."""
        return {
            "version": self.policy_version, "served_name": self.model, "weights_path": "/fake",
            "state": "serving", "loaded_at": "2026-01-01T00:00:00Z", "loads": len(self.loads),
            "failed_loads": 0, "weights": self.weights,
        }  # fmt: skip


def _cut_at_stop(text: str, body: dict[str, Any]) -> tuple[str, str | None]:
    """`text` ended at its first stop string as vLLM does (kept with vLLM's
    include_stop_str_in_output, dropped as OpenAI does otherwise), and the stop matched."""
    stops = body.get("stop") or []
    found = [(text.find(stop), stop) for stop in stops if stop in text]
    if not found:
        return text, None
    at, stop = min(found)
    keep = at + len(stop) if body.get("include_stop_str_in_output") else at
    return text[:keep], stop


@contextmanager
def serve_fake_openai(fake: FakeOpenAI) -> Iterator[str]:
    """Serve `fake` on a free localhost port in a thread; yields the base URL up to /v1."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(fake.app(), log_level="warning", lifespan="off", loop="asyncio")
    )
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the fake OpenAI server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        # A test may leave a call hanging on purpose (delay_s): don't wait for it to end.
        server.force_exit = True
        thread.join(timeout=30)
        sock.close()


def main() -> None:
    """Serve one fixed answer in a process of its own, for benchmarks.

    `python -m tests.fakes.openai_server "ANSWER" [DELAY_S]` prints the base URL as its
    first line of output and serves until killed. In its own process the fake competes with the code
    under measurement for CPU only, not for the GIL, as a real model server would.
    """
    import sys

    answer = sys.argv[1]
    delay_s = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0
    fake = FakeOpenAI(responder=lambda messages, index: answer, delay_s=delay_s)
    fake.requests = _Discard()  # a benchmark sends many requests; keep none
    with serve_fake_openai(fake) as url:
        print(url, flush=True)
        threading.Event().wait()


class _Discard(list[dict[str, Any]]):
    def append(self, item: dict[str, Any]) -> None:
        pass


if __name__ == "__main__":
    main()
