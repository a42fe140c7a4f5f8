"""Spreading rollout groups over the inference replicas of a training job.

A job that names `replicas` (/v1 URLs, or `dns+http://NAME:PORT/v1` for a Kubernetes
headless Service, resolved again at each refresh: `cobalt.shared.replicas`) has each group
sampled by one ready replica, chosen by rendezvous hashing of the group's key (job,
context, round) over the ready ones.

Why a consistent hash rather than least outstanding requests: the workers are separate
processes, so each would only count its own requests, while a hash needs no shared state
and sends every request of a group to the same replica: the n samples of a turn share the
prompt, the turns of an episode extend the same conversation, and a retried group (a
worker that died, a re-queued round) lands where its prefix is cached already. Rendezvous
hashing moves only the groups of a replica that leaves (or joins) the ready set.

Ready means `GET /ready` answered 200: with `COBALT_INFERENCE_CHECKPOINT_DIR` a replica
answers it only while it serves the trainer's newest published version, so a replica
that restarted or missed a publish is skipped until it has caught up. A replica that
fails a request (cannot be reached, or answers 5xx) is dropped from the ready set and the
request goes to the next one in the group's order. The group itself is written once, by
the ledger's unique key, whichever replica sampled it; every response still carries the
version stamp it is recorded (and trained) with.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import httpx

from cobalt.orchestrator.rollouts.sampling import ChatSampler, Sample, SamplingParams
from cobalt.shared.clients import ModelEndpoint
from cobalt.shared.errors import Unavailable, UpstreamError
from cobalt.shared.replicas import expand_replicas

__all__ = ["READY_TTL_S", "ReplicaRouter", "ReplicaSampler", "rendezvous_order"]

READY_TTL_S = 2.0
"""How long one look at the replicas' /ready holds (each worker looks for itself)."""
READY_TIMEOUT_S = 2.0
"""A replica that does not answer /ready this fast is not ready."""


def rendezvous_order(key: str, urls: Sequence[str]) -> list[str]:
    """`urls` in the order a group with `key` tries them (highest hash first)."""

    def weight(url: str) -> bytes:
        return hashlib.sha256(f"{key}\n{url}".encode()).digest()

    return sorted(urls, key=weight, reverse=True)


def _root(v1_url: str) -> str:
    return v1_url.rstrip("/").removesuffix("/v1")


class ReplicaRouter:
    """The ready replicas of one replica list, looked at every `READY_TTL_S` at most."""

    def __init__(
        self,
        specs: Sequence[str],
        *,
        http: httpx.AsyncClient | None = None,
        ttl_s: float = READY_TTL_S,
    ) -> None:
        self.specs = list(specs)
        self.ttl_s = ttl_s
        self._http = http
        self._ready: list[str] = []
        self._all: list[str] = []
        self._looked_at = -float("inf")
        self._lock = asyncio.Lock()

    async def _is_ready(self, http: httpx.AsyncClient, url: str) -> bool:
        try:
            response = await http.get(f"{_root(url)}/ready", timeout=READY_TIMEOUT_S)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    async def replicas(self) -> tuple[list[str], list[str]]:
        """(ready replicas, every replica) now, from the cache when it is fresh."""
        async with self._lock:
            if time.monotonic() - self._looked_at < self.ttl_s:
                return list(self._ready), list(self._all)
            urls = await asyncio.to_thread(expand_replicas, self.specs)
            http = self._http or httpx.AsyncClient()
            try:
                ready = await asyncio.gather(*(self._is_ready(http, url) for url in urls))
            finally:
                if self._http is None:
                    await http.aclose()
            self._all = urls
            self._ready = [url for url, ok in zip(urls, ready, strict=True) if ok]
            self._looked_at = time.monotonic()
            return list(self._ready), list(self._all)

    def failed(self, url: str) -> None:
        """`url` failed a request: out of the ready set until the next look."""
        if url in self._ready:
            self._ready.remove(url)

    async def order(self, key: str) -> list[str]:
        """The replicas a group with `key` tries, in order: the ready ones by rendezvous
        hash; when none is ready (all loading a new version at once), every replica, so
        the request waits in a replica's gate rather than failing."""
        ready, every = await self.replicas()
        if not every:
            raise Unavailable(f"no inference replica: {', '.join(self.specs)} resolves to none")
        return rendezvous_order(key, ready or every)


class ReplicaSampler(ChatSampler):
    """A `ChatSampler` whose requests go to the group's replica (see the module)."""

    def __init__(
        self,
        endpoint: ModelEndpoint,
        *,
        router: ReplicaRouter,
        group_key: str,
        sampler_for: Callable[[ModelEndpoint], Awaitable[ChatSampler]],
    ) -> None:
        # No client of its own: each replica's sampler lives on the runtime.
        self.endpoint = endpoint
        self._owns_client = False
        self.router = router
        self.group_key = group_key
        self._sampler_for = sampler_for
        self.used: list[str] = []
        """The replicas asked, in order (the last one answered)."""

    async def aclose(self) -> None:
        return None

    async def sample(self, messages: list[dict[str, Any]], params: SamplingParams) -> list[Sample]:
        failures: list[str] = []
        last: Exception | None = None
        for url in await self.router.order(self.group_key):
            self.used.append(url)
            sampler = await self._sampler_for(self.endpoint.model_copy(update={"base_url": url}))
            try:
                return await sampler.sample(messages, params)
            except (Unavailable, UpstreamError) as exc:
                # Unreachable or a 5xx: another replica takes the request; a 4xx
                # (InvalidInput) is the request's fault and would fail anywhere.
                if isinstance(exc, UpstreamError) and (exc.upstream_status or 500) < 500:
                    raise
                self.router.failed(url)
                failures.append(f"{url}: {exc.message}")
                last = exc
        raise Unavailable(
            f"every inference replica failed this request: {'; '.join(failures)}"
        ) from last
