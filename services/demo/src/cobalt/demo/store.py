"""Where `cobalt demo` and `cobalt experiment` store their runs, jobs and datasets: one
rule, printed before anything starts (docs/configuration.md, "Demo and `cobalt up`").

- `--store URL` given: that store (a team's PostgreSQL only when asked for by name);
- else the user's own SQLite file (`$XDG_DATA_HOME/cobalt/cobalt.db`, the default of
  every `cobalt` command), where `cobalt run list` and the web UI find the runs.

COBALT_DATABASE_URL is not read: a demo tried on a machine set up for a team must not
write its runs into the team's store. Where it is set to another store, the line says
so and how to write there instead. The work dir holds files (model, checkpoints, logs,
report), never the store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["StoreChoice", "choose_store"]


@dataclass(frozen=True)
class StoreChoice:
    url: str
    given: bool
    """Whether --store named it (else the user's default file)."""
    ignored_environment: str | None = None
    """COBALT_DATABASE_URL, where it is set to another store (not used)."""

    @property
    def shown_url(self) -> str:
        from sqlalchemy.engine import make_url

        return make_url(self.url).render_as_string(hide_password=True)

    def lines(self, command: str) -> list[str]:
        """What the command prints first: where its results go and why."""
        why = "--store" if self.given else "the user's store; --store URL for another"
        lines = [f"store: {self.shown_url} ({why})"]
        if self.ignored_environment is not None:
            lines.append(
                f"note: COBALT_DATABASE_URL is set but `cobalt {command}` does not use it; "
                f'pass --store "$COBALT_DATABASE_URL" to write there'
            )
        if not self.given:
            lines.append(
                "  (`cobalt run list` reads it when COBALT_DATABASE_URL is unset, or with "
                f"COBALT_DATABASE_URL={self.shown_url})"
            )
        return lines


def choose_store(store: str | None) -> StoreChoice:
    """The store of a demo or experiment given `--store` (None: not given).

    Raises:
        ValueError: --store is not a database URL SQLAlchemy can read.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from cobalt.orchestrator.settings import default_database_url

    if store is not None:
        try:
            parsed = make_url(store)
        except ArgumentError as exc:
            raise ValueError(
                f"--store {store!r} is not a database URL (sqlite:///path or "
                "postgresql+psycopg://user@host/db)"
            ) from exc
        database = parsed.database or ""
        if parsed.get_backend_name() == "sqlite" and database not in ("", ":memory:"):
            folder = Path(database).expanduser().parent
            if not folder.is_dir():  # a mistyped path would become a new, empty store
                raise ValueError(f"--store names a SQLite file in {folder}, which does not exist")
        return StoreChoice(store, given=True)
    url = default_database_url()
    environment = os.environ.get("COBALT_DATABASE_URL")
    ignored = environment if environment and environment != url else None
    return StoreChoice(url, given=False, ignored_environment=ignored)
