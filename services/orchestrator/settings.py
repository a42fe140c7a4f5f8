"""Orchestrator settings: where the database, the queue and the executor are."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from cobalt.shared.settings import CobaltSettings

__all__ = ["OrchestratorSettings", "default_database_url"]


def default_database_url() -> str:
    """The embedded default: a SQLite file in the user's data directory."""
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return f"sqlite:///{base / 'cobalt' / 'cobalt.db'}"


class OrchestratorSettings(CobaltSettings):
    """Read from `COBALT_*` variables (the names other tools script against)."""

    model_config = SettingsConfigDict(env_prefix="COBALT_", frozen=True, extra="ignore")

    database_url: str = Field(default_factory=default_database_url)
    """SQLAlchemy URL; PostgreSQL in deployment (postgresql+psycopg://...). Unset: SQLite."""
    import_batch_size: int = Field(default=1000, ge=1)
    """Problems written per INSERT during imports."""
