"""HTTP clients for Cobalt's services: contracts in, contracts out, errors from one tree.

`base` holds what every client shares (timeouts, the retry policy, the error mapping);
one module per service holds its endpoints.
"""

from cobalt.shared.clients.base import (
    DEFAULT_LIMITS,
    DEFAULT_MAX_RETRIES,
    DEFAULT_RETRY,
    AsyncServiceClient,
    RetryPolicy,
    ServiceClient,
    wait_until_ready,
)
from cobalt.shared.clients.executor import (
    DEFAULT_TIMEOUT,
    AsyncExecutorClient,
    ExecutorAddress,
    ExecutorClient,
    ExecutorClientSettings,
)
from cobalt.shared.clients.inference import (
    InferenceControlClient,
    ModelEndpoint,
    PolicyEndpointSettings,
    ReferenceEndpointSettings,
    policy_version_of,
)
from cobalt.shared.clients.training import TrainingClient

__all__ = [
    "AsyncExecutorClient",
    "AsyncServiceClient",
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_RETRY",
    "DEFAULT_TIMEOUT",
    "ExecutorAddress",
    "ExecutorClient",
    "ExecutorClientSettings",
    "InferenceControlClient",
    "ModelEndpoint",
    "PolicyEndpointSettings",
    "ReferenceEndpointSettings",
    "RetryPolicy",
    "ServiceClient",
    "TrainingClient",
    "policy_version_of",
    "wait_until_ready",
]
