"""The choices `cobalt bandit` offers that belong to the builder and the exporter.

They live apart from `builder` and `export` because those import SQLAlchemy and pyarrow,
and `cobalt bandit --help` shows these values without running either. The selection
rules' own defaults (`DEFAULT_KEEP`, ...) are in `selection`, which imports nothing heavy.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["DEFAULT_MAX_PROMPT_TOKENS", "DEFAULT_SEED", "ExportFormat"]

DEFAULT_MAX_PROMPT_TOKENS = 10_000
"""Longest rendered prompt (in the policy's tokens) a context may have."""
DEFAULT_SEED = 42
"""Seed of the contexts' shuffle and of the mixing."""


class ExportFormat(StrEnum):
    VERL = "verl"
    JSONL = "jsonl"
