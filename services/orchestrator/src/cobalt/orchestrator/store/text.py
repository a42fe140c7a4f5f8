"""Column types for text that PostgreSQL can always store.

A model's response and a judged program's output may contain NUL (U+0000), and so may an
imported file or an API client's string. PostgreSQL's text and varchar cannot hold NUL
("text fields cannot contain NUL (0x00) bytes"), so one such character used to fail the
whole write: a run's problem failed, a request became a 500. Every text and varchar column
binds through these types, which store NUL as U+2400 SYMBOL FOR NULL ("␀"), visible where
the text is shown, on SQLite too, so both stores hold the same text. JSON columns need
nothing: PostgreSQL's `json` (not `jsonb`) keeps the `\\u0000` escape as written.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import String, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

__all__ = ["NUL_SYMBOL", "StoredString", "StoredText", "without_nul"]

NUL_SYMBOL = "\u2400"


def without_nul(value: Any) -> Any:
    """`value` with every NUL in its strings (keys included) replaced by NUL_SYMBOL."""
    if isinstance(value, str):
        return value.replace("\x00", NUL_SYMBOL) if "\x00" in value else value
    if isinstance(value, list | tuple):
        return [without_nul(item) for item in value]
    if isinstance(value, dict):
        return {without_nul(key): without_nul(item) for key, item in value.items()}
    return value


class StoredText(TypeDecorator[str]):
    """TEXT without NUL."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else without_nul(value)


class StoredString(TypeDecorator[str]):
    """VARCHAR(n) without NUL."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> str | None:
        return None if value is None else without_nul(value)
