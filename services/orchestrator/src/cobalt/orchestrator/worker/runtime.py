"""What a process that runs rollout jobs keeps between them: one event loop with its open
HTTP clients, one database engine per URL, and the settings its entry point built.

A job used to build its own event loop, openai client and executor client, and throw
them away at the end. Building an HTTP client loads the system's CA certificates (about
40 ms each, measured by bench/rollouts.py's profile) and every job opened fresh TCP
connections, which for a few turns per job cost more than the turns themselves. So a
process keeps one loop running in a daemon thread, and the clients for each endpoint and
executor live on it, with their connection pools, across jobs.

Jobs (RQ's non-forking worker, or the threads of the in-process runner) hand a
coroutine to `RolloutRuntime.run` and block until it finishes. If the waiting thread is
interrupted (RQ's job timeout raises in it), the coroutine is cancelled, so no turn of an
abandoned job keeps running behind the next job's back.

A forked child (RQ's forking worker) starts without the parent's loop thread; the
module forgets the parent's runtime at fork, so the child builds its own on first use.

When the process is told to stop (Ctrl-C, SIGTERM), `interrupt()` cancels every job's
coroutine at once: a turn is either written whole or not at all (a turn's rows are saved
in one transaction, after its model call and its tests), and each job's `run` raises
`JobInterrupted`, so the job lets go of its trajectories and nothing waits for a model
call or an executor retry to end.

Settings are built once, by the entry point (`cobalt worker`, the API, the CLI), and
installed here (`install_job_context`): a job taken from the queue reads them instead of
the environment, and nothing writes `os.environ` to hand a job its executor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import openai
from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.rollouts.sampling import ChatSampler, openai_client_for
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker
from cobalt.shared.clients import (
    AsyncExecutorClient,
    ExecutorClientSettings,
    ModelEndpoint,
    ReferenceEndpointSettings,
)
from cobalt.shared.clients.inference import probe_endpoint
from cobalt.shared.errors import Unavailable

__all__ = [
    "JobConnections",
    "JobContext",
    "JobInterrupted",
    "JobResources",
    "RolloutRuntime",
    "close_runtime",
    "install_job_context",
    "job_context",
    "job_resources",
    "runtime",
    "sessions_for",
]

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

    def __init__(self, *, max_open_clients: int = MAX_OPEN_CLIENTS) -> None:
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
        self._extensions_setting: bool | str | None = None
        self._detected: dict[str, bool] = {}

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
        COBALT_REFERENCE_VLLM_EXTENSIONS when true or false; when "auto" (the default),
        whether the endpoint says it is vLLM (`probe_endpoint`, asked once per process).
        A strict provider rejects fields it does not know, so unknown means no."""
        with self._lock:
            if self._extensions_setting is None:
                setting = ReferenceEndpointSettings().vllm_extensions
                self._extensions_setting = "auto" if setting is None else setting
            if self._extensions_setting != "auto":
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

    async def executor_client(self, url: str | None, token: str | None) -> AsyncExecutorClient:
        """The open executor client for `url` (None: COBALT_EXECUTOR_URL's executor)."""

        def build() -> tuple[Any, _CloseFn]:
            if url:
                client = AsyncExecutorClient(base_url=url, token=token)
            else:
                client = AsyncExecutorClient.from_settings(ExecutorClientSettings())
            return client, client.close

        client: AsyncExecutorClient = await self._executors.get((url, token), build)
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


_RUNTIME: RolloutRuntime | None = None
_RUNTIME_LOCK = threading.Lock()


def runtime() -> RolloutRuntime:
    """This process's runtime, started on first use."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None:
            _RUNTIME = RolloutRuntime()
        return _RUNTIME


def close_runtime() -> None:
    """Close this process's runtime, if one was started (a new one starts on next use)."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        current, _RUNTIME = _RUNTIME, None
    if current is not None:
        current.close()


def _forget_after_fork() -> None:
    # The loop thread does not exist in a forked child, and the parent's sockets must not
    # be shared with it: start over. (The lock may have been held at fork, so replace it.)
    global _RUNTIME, _RUNTIME_LOCK
    _RUNTIME = None
    _RUNTIME_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


_SESSIONS: dict[str, sessionmaker[Session]] = {}
_SESSIONS_LOCK = threading.Lock()


def sessions_for(url: str) -> sessionmaker[Session]:
    """One engine per database per process: its connection pool and compiled-statement
    cache then serve every job the process runs (in-process jobs, a non-forking worker)."""
    with _SESSIONS_LOCK:
        if url not in _SESSIONS:
            _SESSIONS[url] = make_sessionmaker(make_engine(url))
        return _SESSIONS[url]


@dataclass(frozen=True, slots=True)
class JobContext:
    """What the process's entry point decided for every job it runs."""

    settings: OrchestratorSettings
    executor_url: str | None = None
    """The executor jobs use (None: COBALT_EXECUTOR_URL's, read by the executor client)."""
    executor_token: str | None = None


_CONTEXT: JobContext | None = None


def install_job_context(context: JobContext) -> None:
    """Make `context` what jobs of this process use (`cobalt worker` calls this once)."""
    global _CONTEXT
    _CONTEXT = context


@dataclass(frozen=True, slots=True)
class JobConnections:
    """Where one job reaches the model endpoint, the executor and the database, when its
    caller decides (the in-process runner passes all four); a queued job carries only the
    model's API key, and the worker's job context decides the rest.

    One value instead of four keyword arguments, so that every job takes the same thing and
    a new connection is added in one place. The API key travels with the job, never into
    the database.
    """

    api_key: str | None = None
    executor_url: str | None = None
    """None: the process's executor (`JobContext`)."""
    executor_token: str | None = None
    database_url: str | None = None
    """None: the process's database (`JobContext.settings`)."""


@dataclass(frozen=True, slots=True)
class JobResources:
    """What one job uses: the process's settings, its database, its executor and the model
    endpoint's API key."""

    settings: OrchestratorSettings
    sessions: sessionmaker[Session]
    executor_url: str | None
    executor_token: str | None
    api_key: SecretStr | None


def job_resources(connections: JobConnections | None) -> JobResources:
    """The job's database and executor: as its caller passed them (the in-process runner),
    else the process's (`job_context`)."""
    process = job_context()
    connections = connections or JobConnections()
    executor_url, executor_token = connections.executor_url, connections.executor_token
    if executor_url is None:
        executor_url, executor_token = process.executor_url, process.executor_token
    return JobResources(
        settings=process.settings,
        sessions=sessions_for(connections.database_url or process.settings.database_url),
        executor_url=executor_url,
        executor_token=executor_token,
        api_key=SecretStr(connections.api_key) if connections.api_key else None,
    )


def job_context() -> JobContext:
    """The installed context; a process nobody configured (e.g. a plain `rq worker`) gets
    one built from the environment, once."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = JobContext(settings=OrchestratorSettings())
    return _CONTEXT
