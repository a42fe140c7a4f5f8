"""The Cobalt reward as verl's custom reward function, for GRPO with verl on a Ray cluster.

verl's reward loop calls `compute_score(data_source, solution_str, ground_truth,
extra_info)` for every response and awaits it, since it is a coroutine. The rows come
from `cobalt bandit export --format verl` (or `cobalt train export-verl`): `ground_truth`
is JSON `{"tests": [...], "public_tests": k}` in the executor's format and
`extra_info["prev_best"]` is the context's b. The response's program runs on every test
through the executor at `COBALT_EXECUTOR_URL` (the client retries 429, 5xx and transport
errors with backoff); at most `COBALT_VERL_MAX_CONCURRENT` (default 64) executor requests
are in flight per process. The length terms count with the policy's tokenizer
(`COBALT_REWARD_TOKENIZER`, else `COBALT_POLICY_TOKENIZER`): verl passes only the text.

The result is a dict: `score` (the training reward, `total`) and every component, which
verl logs per step. `compute_score_blocking` is the same for verl's synchronous reward
managers.

Configure verl with:
    reward.custom_reward_function.path=<this file or the exported cobalt_reward.py>
    reward.custom_reward_function.name=compute_score
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
from typing import Any

from pydantic import TypeAdapter

from cobalt.shared.clients.executor import AsyncExecutorClient, ExecutorClientSettings
from cobalt.shared.contracts import StoredTest
from cobalt.shared.errors import InvalidInput
from cobalt.shared.execution import execute_programs
from cobalt.shared.extraction import extract_program
from cobalt.shared.reward.rules import score_response
from cobalt.shared.reward.tokens import RewardSettings, TokenizerCounter

__all__ = ["DEFAULT_MAX_CONCURRENT", "close_clients", "compute_score", "compute_score_blocking"]

DEFAULT_MAX_CONCURRENT = 64
"""Executor requests in flight per process unless COBALT_VERL_MAX_CONCURRENT says otherwise."""

_TESTS = TypeAdapter(list[StoredTest])


@functools.lru_cache(maxsize=1)
def _tokens() -> TokenizerCounter:
    return TokenizerCounter.from_settings(RewardSettings())


class _LoopResources:
    """One executor client and one semaphore per event loop (verl may run several)."""

    def __init__(self) -> None:
        self.client = AsyncExecutorClient.from_settings(_executor_settings())
        limit = int(os.environ.get("COBALT_VERL_MAX_CONCURRENT", DEFAULT_MAX_CONCURRENT))
        self.gate = asyncio.Semaphore(max(1, limit))


_RESOURCES: dict[int, _LoopResources] = {}


def _executor_settings() -> ExecutorClientSettings:
    settings = ExecutorClientSettings()
    if not settings.url:
        raise InvalidInput(
            "the Cobalt reward runs programs on the executor: set COBALT_EXECUTOR_URL"
        )
    return settings


def _resources() -> _LoopResources:
    loop = asyncio.get_running_loop()
    if id(loop) not in _RESOURCES:
        _RESOURCES[id(loop)] = _LoopResources()
    return _RESOURCES[id(loop)]


async def close_clients() -> None:
    """Close this event loop's executor client (call before the loop ends, e.g. at the end
    of a script that ran `compute_score` under `asyncio.run`)."""
    loop = asyncio.get_running_loop()
    resources = _RESOURCES.pop(id(loop), None)
    if resources is not None:
        await resources.client.close()


def _tests_of(ground_truth: Any) -> list[StoredTest]:
    try:
        truth = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
        tests = _TESTS.validate_python(truth["tests"])
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(
            'ground_truth is not Cobalt\'s {"tests": [...]} (export the data with '
            f"`cobalt bandit export --format verl`): {exc}"
        ) from exc
    if not tests:
        raise InvalidInput("ground_truth holds no tests; a response is scored on at least one")
    return tests


async def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    _resources_override: _LoopResources | None = None,
    **_: Any,
) -> dict[str, Any]:
    """The Cobalt reward of one response, with every component (verl's reward function).

    Raises:
        InvalidInput: the row is not one Cobalt exported, or settings are missing.
        CobaltError: the executor failed after its retries (never a silent zero).
    """
    del data_source  # every Cobalt row is scored the same way
    tests = _tests_of(ground_truth)
    prev_best = float((extra_info or {}).get("prev_best", 0.0))
    program = extract_program(solution_str)
    resources = _resources() if _resources_override is None else _resources_override
    async with resources.gate:
        results = await execute_programs(resources.client, [program], tests)
    passed = results[0].passed if 0 in results else 0
    breakdown = score_response(
        solution_str,
        tests_passed=passed,
        tests_total=len(tests),
        prev_best=prev_best,
        tokens=_tokens(),
    )
    values = breakdown.to_dict()
    values["format_violations"] = len(values["format_violations"])
    values["improvement_rule"] = str(values["improvement_rule"])
    return {"score": breakdown.total, **values}


def compute_score_blocking(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """`compute_score` for callers without an event loop (verl's synchronous managers);
    its executor client lives for the call."""

    async def once() -> dict[str, Any]:
        resources = _LoopResources()
        try:
            return await compute_score(
                data_source,
                solution_str,
                ground_truth,
                extra_info,
                _resources_override=resources,
                **kwargs,
            )
        finally:
            await resources.client.close()

    return asyncio.run(once())
