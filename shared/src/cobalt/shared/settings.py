"""The base of every service's settings class.

Each service defines one pydantic-settings class with its own prefix
(`COBALT_EXECUTOR_`, ...). Entry points build it once and pass it down; nothing reads the
environment at import time. All variables are listed in docs/configuration.md.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["CobaltSettings"]


class CobaltSettings(BaseSettings):
    """Fields and behaviour every service's settings share."""

    model_config = SettingsConfigDict(
        env_prefix="COBALT_",
        extra="ignore",
        validate_default=True,
        frozen=True,
    )

    log_level: str = "INFO"
    """Logging level name for the service's entry point."""

    log_json: bool = False
    """Write logs as JSON lines (for containers) instead of text."""
