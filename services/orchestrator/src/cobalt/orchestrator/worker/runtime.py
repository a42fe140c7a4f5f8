"""What a process that runs jobs keeps between them: its rollout runtime (one event loop
with its open clients, `rollouts.runtime`), one database engine per URL, and what its entry
point decided (`JobContext`: the settings, the executor).

Settings are built once, by the entry point (`cobalt worker`, the API, the CLI), and
installed here (`install_job_context`): a job taken from the queue reads them instead of
the environment, and nothing writes `os.environ` to hand a job its executor.

A forked child (RQ's forking worker) starts without the parent's loop thread; the module
forgets the parent's runtime at fork, so the child builds its own on first use.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.rollouts.runtime import RolloutRuntime
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker
from cobalt.shared.clients import (
    ExecutorAddress,
    ExecutorClientSettings,
    ReferenceEndpointSettings,
)

__all__ = [
    "JobContext",
    "close_runtime",
    "install_job_context",
    "job_context",
    "runtime",
    "sessions_for",
]


@dataclass(frozen=True, slots=True)
class JobContext:
    """What the process's entry point decided for every job it runs."""

    settings: OrchestratorSettings
    executor: ExecutorAddress | None = None
    """The executor queued jobs use (None: none configured; a queued job then fails)."""
    vllm_extensions: bool | None = None
    """COBALT_REFERENCE_VLLM_EXTENSIONS (None: "auto", ask each endpoint)."""

    @classmethod
    def from_environment(cls, executor: ExecutorAddress | None = None) -> JobContext:
        """The context an entry point builds from `COBALT_*` variables (the executor:
        `executor`, else COBALT_EXECUTOR_URL's)."""
        return cls(
            settings=OrchestratorSettings(),
            executor=executor or ExecutorClientSettings().address(),
            vllm_extensions=ReferenceEndpointSettings().vllm_extensions,
        )


_CONTEXT: JobContext | None = None


def install_job_context(context: JobContext) -> None:
    """Make `context` what jobs of this process use (`cobalt worker` calls this once)."""
    global _CONTEXT
    _CONTEXT = context


def job_context() -> JobContext:
    """The installed context; a process nobody configured (a plain `rq worker`, the CLI's
    in-process jobs) gets one built from the environment, once."""
    global _CONTEXT
    if _CONTEXT is None:
        _CONTEXT = JobContext.from_environment()
    return _CONTEXT


_RUNTIME: RolloutRuntime | None = None
_RUNTIME_LOCK = threading.Lock()


def runtime() -> RolloutRuntime:
    """This process's runtime, started on first use."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None:
            _RUNTIME = RolloutRuntime(vllm_extensions=job_context().vllm_extensions)
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
