"""Executor-specific leaves of the shared error tree (see cobalt.shared.errors)."""

from __future__ import annotations

from cobalt.shared.errors import CobaltError, InvalidInput, LimitTooHigh, Overloaded, Unavailable

__all__ = [
    "ClientDisconnected",
    "FileDescriptorsExhausted",
    "LimitTooHigh",  # shared: the orchestrator refuses runs with it too
    "QueueTimeout",
    "SandboxUnavailable",
    "UnsupportedFeature",
]


class SandboxUnavailable(Unavailable):
    """The sandbox cannot be built or started on this machine."""

    error_type = "sandbox_unavailable"


class UnsupportedFeature(InvalidInput):
    """The request asks for something this executor does not offer."""

    error_type = "unsupported"


class FileDescriptorsExhausted(Unavailable):
    """The server has no file descriptors left for a test's pipes: retry shortly."""

    error_type = "out_of_file_descriptors"
    retry_after_s = 1.0


class ClientDisconnected(CobaltError):
    """The client went away before its request was answered (nobody reads the reply)."""

    status_code = 499
    error_type = "client_disconnected"


class QueueTimeout(Overloaded):
    """No room to run the program within the time a client waits: retry (with Retry-After).

    A 504, not a 429, because the clients of SandboxFusion's `/run_code` retry a gateway
    timeout and score every other status, a 429 included, as a failed program (verl).
    """

    status_code = 504
    error_type = "queue_timeout"
