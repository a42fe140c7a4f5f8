"""Executor-specific leaves of the shared error tree (see cobalt.shared.errors)."""

from __future__ import annotations

from cobalt.shared.errors import InvalidInput, Unavailable

__all__ = ["LimitTooHigh", "SandboxUnavailable", "UnsupportedFeature"]


class SandboxUnavailable(Unavailable):
    """The sandbox cannot be built or started on this machine."""

    error_type = "sandbox_unavailable"


class LimitTooHigh(InvalidInput):
    """A requested limit is above what this executor allows."""

    error_type = "limit_too_high"


class UnsupportedFeature(InvalidInput):
    """The request asks for something this executor does not offer."""

    error_type = "unsupported"
