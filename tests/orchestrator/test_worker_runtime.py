"""The per-process rollout runtime: one loop, clients kept open between jobs."""

from __future__ import annotations

import asyncio
import os
import signal
import threading

import pytest
from pydantic import SecretStr

from cobalt.orchestrator.rollouts.runtime import RolloutRuntime
from cobalt.orchestrator.worker import runtime as runtime_module
from cobalt.orchestrator.worker.runtime import close_runtime, runtime
from cobalt.shared.clients import (
    AsyncExecutorClient,
    ExecutorAddress,
    ExecutorClient,
    ExecutorClientSettings,
    ModelEndpoint,
)


def _endpoint(url: str = "http://127.0.0.1:9/v1", key: str | None = None) -> ModelEndpoint:
    return ModelEndpoint(
        base_url=url, model="m", api_key=SecretStr(key) if key is not None else None
    )


def test_jobs_share_one_client_per_endpoint_and_key() -> None:
    rt = RolloutRuntime()
    try:

        async def clients() -> list[object]:
            samplers = [
                await rt.sampler(_endpoint()),
                await rt.sampler(_endpoint()),
                await rt.sampler(_endpoint(key="other")),
            ]
            executors = [
                await rt.executor_client(ExecutorAddress("http://127.0.0.1:9")),
                await rt.executor_client(ExecutorAddress("http://127.0.0.1:9")),
            ]
            return [s._client for s in samplers] + executors

        first, again, other_key, executor, executor_again = rt.run(clients)
        assert first is again and first is not other_key
        assert executor is executor_again
    finally:
        rt.close()


def test_an_executor_client_has_the_configured_timeout_and_retries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """COBALT_EXECUTOR_CLIENT_TIMEOUT_S and _MAX_RETRIES reach the jobs' asyncio clients
    (they had the defaults, 300 s, whatever was set: a stalled executor held a worker's
    job for 5 minutes)."""
    monkeypatch.setenv("COBALT_EXECUTOR_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("COBALT_EXECUTOR_CLIENT_TIMEOUT_S", "7")
    monkeypatch.setenv("COBALT_EXECUTOR_CLIENT_MAX_RETRIES", "2")
    address = ExecutorClientSettings().address()
    assert address is not None
    with ExecutorClient.from_settings(ExecutorClientSettings()) as sync_client:
        assert sync_client.address() == address
    rt = RolloutRuntime()
    try:

        async def client() -> AsyncExecutorClient:
            return await rt.executor_client(address)

        built = rt.run(client)
        assert built._client.timeout.read == 7 and built.retry.max_retries == 2
    finally:
        rt.close()


def test_the_least_recently_used_client_is_closed_beyond_capacity() -> None:
    rt = RolloutRuntime(max_open_clients=2)
    try:

        async def fill() -> list[bool]:
            oldest = (await rt.sampler(_endpoint("http://127.0.0.1:9/a/v1")))._client
            await rt.sampler(_endpoint("http://127.0.0.1:9/b/v1"))
            before = oldest.is_closed()
            await rt.sampler(_endpoint("http://127.0.0.1:9/c/v1"))
            return [before, oldest.is_closed()]

        assert rt.run(fill) == [False, True]
    finally:
        rt.close()


def test_an_interrupted_wait_cancels_the_coroutine() -> None:
    rt = RolloutRuntime()
    cancelled = threading.Event()

    async def long_job() -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    class JobTimeout(Exception):
        pass

    def time_out(signum: int, frame: object) -> None:
        raise JobTimeout

    # What RQ's job timeout does: SIGALRM, whose handler raises in the waiting thread.
    previous = signal.signal(signal.SIGALRM, time_out)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(JobTimeout):
            rt.run(long_job)
        assert cancelled.wait(10), "the abandoned job kept running"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        rt.close()


def test_closed_runtime_refuses_work_and_the_process_one_restarts() -> None:
    first = runtime()
    close_runtime()
    with pytest.raises(RuntimeError, match="closed"):
        first.run(
            asyncio.sleep,
        )  # type: ignore[arg-type]
    second = runtime()
    try:
        assert second is not first
        assert second.run(lambda: asyncio.sleep(0, result=5)) == 5
    finally:
        close_runtime()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_builds_its_own_runtime() -> None:
    parent = runtime()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: must not reuse the parent's loop, whose thread is gone
        ok = runtime_module._RUNTIME is None
        child = runtime()
        ok = ok and child is not parent and child.run(lambda: asyncio.sleep(0, result=1)) == 1
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 1) == b"1"
    finally:
        os.close(read)
        os.waitpid(pid, 0)
        close_runtime()
