"""Executor-specific leaves of the shared error tree (see cobalt.shared.errors)."""

from __future__ import annotations

from cobalt.shared.errors import CobaltError, InvalidInput, LimitTooHigh, Unavailable

__all__ = [
    "ClientDisconnected",
    "FileDescriptorsExhausted",
    "LimitTooHigh",  # shared: the orchestrator refuses runs with it too
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
