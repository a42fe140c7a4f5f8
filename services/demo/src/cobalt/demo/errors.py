"""Errors of `cobalt demo` and `cobalt up`: one leaf of the shared tree."""

from __future__ import annotations

from cobalt.shared.errors import CobaltError

__all__ = ["DemoFailed"]


class DemoFailed(CobaltError):
    """A step of the demo (or a service of `cobalt up`) failed; the message says which and
    what to do about it."""

    error_type = "demo_failed"
