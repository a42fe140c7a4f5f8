"""Orchestrator settings: where the database, the queue and the executor are."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field, SecretStr, model_validator
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
    redis_url: str | None = None
    """Redis for the rollout queue (redis://host:6379/0). Unset: jobs run in-process."""
    job_retries: int = Field(default=3, ge=0, le=20)
    """Times RQ retries a failed or abandoned rollout job (it resumes from stored turns)."""
    job_timeout_s: int = Field(default=6 * 3600, ge=10)
    """Longest one job (all turns of one problem) may run on a worker."""
    run_recovery_interval_s: float = Field(default=10.0, ge=0)
    """How often `cobalt worker` processes look for runs' jobs the queue lost (a worker
    killed, Redis emptied) and queue them again from the database; 0: never."""
    orchestrator_host: str = "127.0.0.1"
    """Address `cobalt orchestrator serve` listens on: this machine only unless told (the
    container images set 0.0.0.0, with tokens)."""
    orchestrator_port: int = Field(default=8200, ge=1, le=65535)
    orchestrator_read_token: SecretStr | None = None
    """Bearer token for reading (GET): the web UI, dashboards. Needs the write token too."""
    orchestrator_write_token: SecretStr | None = None
    """Bearer token for everything: clients, workers, the trainer. Unset (with no read
    token): the API is open, for local use on 127.0.0.1."""
    orchestrator_max_body_bytes: int = Field(default=1 << 20, ge=1024)
    """Largest request body the API accepts (413 above it)."""
    orchestrator_header_timeout_s: float = Field(default=10.0, gt=0)
    """A connection that has not sent a request's headers this long is closed."""
    orchestrator_body_timeout_s: float = Field(default=30.0, gt=0)
    """Longest wait for the next piece of a request body (408 after it)."""
    orchestrator_body_deadline_s: float = Field(default=60.0, gt=0)
    """The whole request body must arrive within this long of the request's head (408)."""
    local_concurrency: int = Field(default=4, ge=1, le=256)
    """Problems rolled out at once when jobs run in-process."""
    training_stale_s: float = Field(default=1800.0, gt=0)
    """A pending or running training job silent this long (no step reported, no group
    written) is shown as stale: its trainer has probably stopped."""

    @model_validator(mode="after")
    def _tokens_usable(self) -> OrchestratorSettings:
        read, write = self.orchestrator_read_token, self.orchestrator_write_token
        if read is not None and write is None:
            raise ValueError(
                "COBALT_ORCHESTRATOR_READ_TOKEN is set without COBALT_ORCHESTRATOR_WRITE_TOKEN: "
                "nobody could start a run or train; set both"
            )
        if read is not None and write is not None and read == write:
            raise ValueError("the orchestrator's read and write tokens must differ")
        return self
