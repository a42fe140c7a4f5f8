"""HTTP clients for Cobalt's services: contracts in, contracts out, errors from one tree."""

from cobalt.shared.clients.executor import (
    DEFAULT_LIMITS,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    AsyncExecutorClient,
    ExecutorClient,
    ExecutorClientSettings,
)

__all__ = [
    "AsyncExecutorClient",
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "ExecutorClient",
    "ExecutorClientSettings",
]
