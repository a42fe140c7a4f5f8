"""A stand-in vLLM engine under the control middleware, and an HTTP client to it: the
weight-load state machine driven without vLLM (tests/inference/test_control.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx

from cobalt.inference.control import PolicyControlMiddleware
from cobalt.inference.settings import InferenceSettings

TOKEN = "secret"
LOADED = {"loaded": True, "error": None, "restored": None}

Behaviour = dict[str, Any] | BaseException | Callable[[], Awaitable[dict[str, Any]]]


class StandInEngine:
    """Records reload calls; answers each with the next scripted behaviour."""

    def __init__(self, *behaviours: Behaviour) -> None:
        self.behaviours = list(behaviours)
        self.calls: list[dict[str, Any]] = []
        self.methods: list[str] = []
        self.cache_resets = 0

    async def collective_rpc(self, method: str, kwargs: dict[str, Any]) -> list[dict[str, Any]]:
        assert method in ("cobalt_reload_weights", "cobalt_receive_weights", "cobalt_load_policy")
        self.methods.append(method)
        self.calls.append(kwargs)
        behaviour = self.behaviours.pop(0) if self.behaviours else LOADED
        if isinstance(behaviour, BaseException):
            raise behaviour
        if callable(behaviour):
            return [await behaviour()]
        return [behaviour]

    async def reset_prefix_cache(self) -> bool:
        self.cache_resets += 1
        return True


class Generation:
    """The wrapped app: a 'generation' that finishes when the test says so."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.release.set()
        self.entered = 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        self.entered += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


def make(tmp_path: Path, engine: StandInEngine, **overrides: Any) -> tuple[Any, Generation, Any]:
    settings = InferenceSettings(
        model=tmp_path / "model",
        served_name="m",
        control_token=TOKEN,
        load_timeout_s=overrides.pop("load_timeout_s", 5.0),
        drain_timeout_s=overrides.pop("drain_timeout_s", 5.0),
        **overrides,
    )
    inner = Generation()
    middleware = PolicyControlMiddleware(inner, settings)
    middleware.controller.engine = engine
    return middleware, inner, middleware.controller


def client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app),
        base_url="http://inference",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10,
    )


async def load(http: httpx.AsyncClient, path: str, **extra: Any) -> httpx.Response:
    return await http.post("/v1/policy/weights", json={"path": path, "check": False, **extra})


def run(coroutine: Awaitable[None]) -> None:
    asyncio.run(coroutine)  # type: ignore[arg-type]


def broadcast_request(**changes: Any) -> dict[str, Any]:
    """A valid `POST /v1/policy/broadcast` body (version 4, gloo, 2 workers), with `changes`."""
    tensors = [
        {"name": "model.embed_tokens.weight", "dtype": "bfloat16", "shape": [64, 8]},
        {"name": "lm_head.weight", "dtype": "bfloat16", "shape": [64, 8]},
    ]
    return {"version": 4, "master_address": "10.0.0.2", "master_port": 29600,
            "world_size": 3, "backend": "gloo", "tensors": tensors, **changes}  # fmt: skip
