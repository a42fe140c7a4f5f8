"""Timestamps that always come back with their time zone.

Every timestamp is UTC. PostgreSQL's `timestamptz` returns it aware; SQLite stores no
zone, so the same column read back from the embedded store was naive and left the API
as `2026-01-01T10:00:00`, which is not an RFC 3339 date-time as the OpenAPI document
promises (schemathesis found it). Read through this type, both stores give UTC-aware
values.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import DateTime
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator

__all__ = ["StoredTime", "utc_now"]


class StoredTime(TypeDecorator[datetime]):
    """TIMESTAMP WITH TIME ZONE, read back aware (UTC) on every database."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


def utc_now() -> datetime:
    """Now, in UTC: what the stores' writers stamp rows with."""
    return datetime.now(UTC)
