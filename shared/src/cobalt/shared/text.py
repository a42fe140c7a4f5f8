"""Text helpers shared by the executor's feedback and the orchestrator's prompts."""

from __future__ import annotations

__all__ = ["truncate_middle"]


def truncate_middle(text: str, limit: int) -> str:
    """Shorten `text` to about `limit` characters by cutting out its middle.

    The start and end of a program's output carry the most information (the first
    lines and the final error), so we keep both and say how much was removed.

    Args:
        text: The text to shorten.
        limit: The largest length to keep; values below 1 keep nothing.

    Returns:
        `text` itself when it fits, else head + marker + tail.
    """
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    omitted = len(text) - limit
    marker = f"\n...[{omitted} characters omitted]...\n"
    keep = max(limit - len(marker), 0)
    head = (keep + 1) // 2
    tail = keep - head
    # Recompute the count so the marker tells the exact number removed.
    omitted = len(text) - head - tail
    marker = f"\n...[{omitted} characters omitted]...\n"
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")
