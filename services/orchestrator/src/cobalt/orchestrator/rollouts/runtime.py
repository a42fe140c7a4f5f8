"""The loop and the open clients rollout work runs on: one event loop in a daemon thread,
with the model and executor clients living on it across jobs.

A job used to build its own event loop, openai client and executor client, and throw
them away at the end. Building an HTTP client loads the system's CA certificates (about
40 ms each, measured by bench/rollouts.py's profile) and every job opened fresh TCP
connections, which for a few turns per job cost more than the turns themselves. So a
process keeps one `RolloutRuntime` (`worker.runtime.runtime()`), and the clients for each
endpoint and executor live on it, with their connection pools, across jobs.

Jobs hand a coroutine to `RolloutRuntime.run` and block until it finishes. If the waiting
thread is interrupted (RQ's job timeout raises in it), the coroutine is cancelled, so no
turn of an abandoned job keeps running behind the next job's back.

When the process is told to stop (Ctrl-C, SIGTERM), `interrupt()` cancels every job's
coroutine at once: a turn is either written whole or not at all (a turn's rows are saved
in one transaction, after its model call and its tests), and each job's `run` raises
`JobInterrupted`, so the job lets go of its trajectories and nothing waits for a model
call or an executor retry to end.

This module reads no settings: whoever builds a runtime says how it treats vLLM's
extensions, and every executor client is asked for by its `ExecutorAddress`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

import openai

from cobalt.orchestrator.rollouts.replicas import ReplicaRouter, ReplicaSampler
from cobalt.orchestrator.rollouts.sampling import ChatSampler, openai_client_for
from cobalt.shared.clients import AsyncExecutorClient, ExecutorAddress, ModelEndpoint, RetryPolicy
from cobalt.shared.clients.inference import probe_endpoint
from cobalt.shared.errors import Unavailable

__all__ = ["JobInterrupted", "RolloutRuntime"]

T = TypeVar("T")

MAX_OPEN_CLIENTS = 8
"""Clients kept per kind; the least recently used one is closed beyond that. Workers talk
to one endpoint and one executor, so this only bounds a process serving many runs."""

_CloseFn = Callable[[], Awaitable[object]]


class JobInterrupted(Exception):
    """The process is stopping (Ctrl-C, SIGTERM): the job's coroutine was cancelled."""


class _ClientCache:
    """Clients by key, least recently used first; evicted clients are closed."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._clients: OrderedDict[tuple[Any, ...], tuple[Any, _CloseFn]] = OrderedDict()

    async def get(self, key: tuple[Any, ...], build: Callable[[], tuple[Any, _CloseFn]]) -> Any:
        if key in self._clients:
            self._clients.move_to_end(key)
            return self._clients[key][0]
        client, close = build()
        self._clients[key] = (client, close)
        while len(self._clients) > self.capacity:
            _, (_, close_oldest) = self._clients.popitem(last=False)
            await close_oldest()
        return client

    async def close_all(self) -> None:
        while self._clients:
            _, (_, close) = self._clients.popitem(last=False)
            await close()


class RolloutRuntime:
    """An event loop in a daemon thread, and the clients that live on it."""

    def __init__(
        self, *, max_open_clients: int = MAX_OPEN_CLIENTS, vllm_extensions: bool | None = None
    ) -> None:
        """`vllm_extensions`: whether model requests carry vLLM's fields (None: ask each
        endpoint once, `vllm_extensions()`)."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="cobalt-rollout-loop", daemon=True
        )
        self._thread.start()
        self._openai = _ClientCache(max_open_clients)
        self._executors = _ClientCache(max_open_clients)
        self._closed = False
        self._interrupted = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._lock = threading.Lock()
        self._extensions_setting = vllm_extensions
        self._detected: dict[str, bool] = {}
        self._routers: dict[tuple[str, ...], ReplicaRouter] = {}

    @property
    def interrupted(self) -> bool:
        return self._interrupted

    def interrupt(self) -> None:
        """Cancel every running job coroutine; `run` raises `JobInterrupted` from now on.

        Safe to call from a signal handler: it only schedules the cancellation on the loop.
        """
        self._interrupted = True

        def cancel_all() -> None:
            for task in list(self._tasks):
                task.cancel()

        if not self._closed:
            self._loop.call_soon_threadsafe(cancel_all)

    def run(self, make_coroutine: Callable[[], Coroutine[Any, Any, T]]) -> T:
        """Run a coroutine on the loop and wait for its result in the calling thread.

        Raises:
            JobInterrupted: `interrupt()` was called (before or while the coroutine ran).
            Whatever the coroutine raises. If the wait itself is interrupted (an exception
            raised in this thread, such as RQ's job timeout), the coroutine is cancelled
            before the exception propagates.
        """
        if self._closed:
            raise RuntimeError("the rollout runtime is closed")
        if self._interrupted:
            raise JobInterrupted("the process is stopping")
        # Not run_coroutine_threadsafe: its future cannot be cancelled once the coroutine
        # runs, so an interrupted wait would leave the job going. Here the task is ours.
        result: concurrent.futures.Future[T] = concurrent.futures.Future()
        tasks: list[asyncio.Task[T]] = []

        def hand_over(task: asyncio.Task[T]) -> None:
            self._tasks.discard(task)
            if task.cancelled() and self._interrupted:
                result.set_exception(JobInterrupted("the process is stopping"))
            elif task.cancelled():
                result.cancel()
            elif (error := task.exception()) is not None:
                result.set_exception(error)
            else:
                result.set_result(task.result())

        def start() -> None:
            if self._interrupted:
                result.set_exception(JobInterrupted("the process is stopping"))
                return
            task = self._loop.create_task(make_coroutine())
            task.add_done_callback(hand_over)
            tasks.append(task)
            self._tasks.add(task)

        self._loop.call_soon_threadsafe(start)
        try:
            return result.result()
        except BaseException:
            self._loop.call_soon_threadsafe(lambda: [task.cancel() for task in tasks])
            raise

    def vllm_extensions(self, base_url: str, api_key: str | None) -> bool:
        """Whether requests to `base_url` carry vLLM's fields (`return_token_ids`, logprobs):
        the runtime's setting when true or false; when None ("auto", the default), whether the
        endpoint says it is vLLM (`probe_endpoint`, asked once per runtime). A strict
        provider rejects fields it does not know, so unknown means no."""
        with self._lock:
            if self._extensions_setting is not None:
                return bool(self._extensions_setting)
            if base_url not in self._detected:
                try:
                    self._detected[base_url] = probe_endpoint(base_url, api_key).vllm
                except Unavailable:
                    return False  # not cached: the sampler reports it, with its retries
            return self._detected[base_url]

    async def sampler(self, endpoint: ModelEndpoint) -> ChatSampler:
        """A sampler for `endpoint` on the endpoint's open client (call on this loop).

        Clients are cached by base URL and API key, so runs with different keys never
        share one; the sampler itself is cheap and per job (it carries the model name).
        """
        key = endpoint.openai_kwargs()

        def build() -> tuple[Any, _CloseFn]:
            client = openai_client_for(endpoint)
            return client, client.close

        client: openai.AsyncOpenAI = await self._openai.get(
            (key["base_url"], key["api_key"]), build
        )
        return ChatSampler(endpoint, client=client)

    def router(self, replicas: Sequence[str]) -> ReplicaRouter:
        """The process's router over one replica list (its ready set is shared by jobs)."""
        with self._lock:
            key = tuple(replicas)
            if key not in self._routers:
                self._routers[key] = ReplicaRouter(replicas)
            return self._routers[key]

    async def replica_sampler(
        self, endpoint: ModelEndpoint, replicas: Sequence[str], group_key: str
    ) -> ReplicaSampler:
        """A sampler that sends the group's requests to its replica (replicas.py); each
        replica's client is the open one of its URL (call on this loop)."""
        return ReplicaSampler(
            endpoint, router=self.router(replicas), group_key=group_key, sampler_for=self.sampler
        )

    async def executor_client(self, executor: ExecutorAddress) -> AsyncExecutorClient:
        """The open client for `executor` (call on this loop)."""

        def build() -> tuple[Any, _CloseFn]:
            client = AsyncExecutorClient(
                base_url=executor.url,
                token=executor.token,
                timeout=executor.timeout_s,
                retry=RetryPolicy(max_retries=executor.max_retries),
            )
            return client, client.close

        key = (executor.url, executor.token, executor.timeout_s, executor.max_retries)
        client: AsyncExecutorClient = await self._executors.get(key, build)
        return client

    def close(self) -> None:
        """Close every client and stop the loop (idempotent)."""
        if self._closed:
            return
        self._closed = True

        async def close_clients() -> None:
            await self._openai.close_all()
            await self._executors.close_all()

        asyncio.run_coroutine_threadsafe(close_clients(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()
