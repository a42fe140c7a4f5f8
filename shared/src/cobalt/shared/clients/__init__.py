"""HTTP clients for Cobalt's services: contracts in, contracts out, errors from one tree."""

from cobalt.shared.clients.executor import (
    DEFAULT_LIMITS,
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    AsyncExecutorClient,
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
    "DEFAULT_LIMITS",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "ExecutorClient",
    "ExecutorClientSettings",
    "InferenceControlClient",
    "ModelEndpoint",
    "PolicyEndpointSettings",
    "ReferenceEndpointSettings",
    "TrainingClient",
    "policy_version_of",
]
