"""Reading error responses of Cobalt services and of vLLM (they share one envelope)."""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["error_envelope"]


def error_envelope(response: httpx.Response) -> tuple[str, Any]:
    """The message and detail of `{"error": {"message": ...}}`, or a summary of another body."""
    try:
        body = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str) and error["message"]:
        return error["message"], error.get("detail")
    text = response.text.strip()
    summary = f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
    return (f"{summary}: {text[:300]}" if text else summary), None
