"""What the orchestrator's commands share: the database context, one error-to-exit-status
mapping, the executor to use, progress bars and JSON output.

Exit statuses and the one-line error are every command's (`cobalt.shared.cli`); the names
are re-exported here for the orchestrator's command modules.

Every command module imports this one, and `cobalt COMMAND --help` imports the command
module, so nothing heavy is imported here at load time: SQLAlchemy and Alembic, the HTTP
clients, the reward's numpy and tokenizers and rich's progress bars are imported by the
function that uses them (tests/test_cli_startup.py checks it).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

# typer 0.29 vendors click; this is its current-context lookup.
from typer._click.globals import get_current_context

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.shared import cli as shared_cli
from cobalt.shared.cli import EXIT_UNREACHABLE, EXIT_USAGE, fail
from cobalt.shared.errors import CobaltError, Overloaded, Unavailable, UpstreamError

if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn
    from sqlalchemy.engine import Engine
    from sqlalchemy.orm import Session, sessionmaker

    from cobalt.shared.clients import ExecutorClient, ExecutorClientSettings
    from cobalt.shared.reward import TokenizerCounter

__all__ = [
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "JsonOption",
    "SamplingSetOption",
    "StoreContext",
    "data_context",
    "echo_json",
    "executor_settings_or_exit",
    "fail",
    "handled",
    "open_executor",
    "progress_bar",
    "report_to_option",
    "reward_tokenizer",
    "sampling_settings_set",
    "settings_or_exit",
    "store_context",
]


def _database_failure(exc: Exception) -> typer.Exit | None:
    """The exit for one of SQLAlchemy's errors, or None when `exc` is not one."""
    # Imported here, on the error path: an error SQLAlchemy raised means it is loaded already.
    from sqlalchemy import exc as sa_exc

    if isinstance(exc, sa_exc.ArgumentError):
        return fail(EXIT_USAGE, f"COBALT_DATABASE_URL is not a usable database URL: {exc}")
    if isinstance(exc, sa_exc.OperationalError | sa_exc.InterfaceError):
        detail = str(exc.orig).strip().splitlines() if exc.orig is not None else []
        reason = detail[0] if detail else type(exc).__name__
        return fail(EXIT_UNREACHABLE, f"cannot use the database: {reason}")
    if isinstance(exc, sa_exc.SQLAlchemyError):
        return fail(EXIT_UNREACHABLE, f"database error: {exc}")
    return None


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Turn the errors a command can meet into one stderr line and an exit status."""
    try:
        yield
    except (Unavailable, UpstreamError, Overloaded) as exc:
        raise fail(EXIT_UNREACHABLE, str(exc)) from exc
    except CobaltError as exc:
        raise fail(EXIT_USAGE, str(exc)) from exc
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        raise fail(EXIT_USAGE, f"cannot use{where}: {exc.strerror or exc}") from exc
    except Exception as exc:
        database = _database_failure(exc)
        if database is None:
            raise
        raise database from exc


JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]
"""`--json`: the command prints one JSON object on stdout (the contract scripts use)."""


def report_to_option(what: str, default: str) -> Any:
    """`--report-to` (COBALT_REPORT_TO): the experiment trackers `what` goes to."""
    return typer.Option(
        "--report-to",
        envvar="COBALT_REPORT_TO",
        help=f"{what}: tensorboard, mlflow, wandb (comma-separated), all or none "
        rf"\[{default}].",
    )


SamplingSetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="NAME=VALUE",
        help="A sampling setting by name, repeatable (any of SamplingSettings: "
        "docs/extending.md); wins over the setting's own option.",
    ),
]
"""`--set NAME=VALUE`: every sampling setting reaches every rollout command, a new one
included, without an option of its own."""


def sampling_settings_set(pairs: list[str] | None) -> dict[str, str]:
    """The `--set` pairs by name (the model checks the values).

    Raises:
        typer.Exit: (2) a pair without "=", or a name that is no sampling setting.
    """
    from cobalt.shared.contracts.sampling import SamplingSettings

    known = SamplingSettings.model_fields
    chosen: dict[str, str] = {}
    for pair in pairs or []:
        name, equals, value = pair.partition("=")
        name = name.strip().replace("-", "_")
        if not equals or name not in known:
            raise fail(
                EXIT_USAGE,
                f"--set {pair!r}: expected NAME=VALUE with NAME one of {', '.join(known)}",
            )
        chosen[name] = value
    return chosen


def settings_or_exit() -> OrchestratorSettings:
    """The orchestrator's settings from the environment (exits 2 on a bad one)."""
    return shared_cli.settings_or_exit(OrchestratorSettings, "COBALT_*")


def executor_settings_or_exit() -> ExecutorClientSettings:
    """Where the executor is, from COBALT_EXECUTOR_* (exits 2 on a bad setting)."""
    from cobalt.shared.clients import ExecutorClientSettings

    return shared_cli.settings_or_exit(ExecutorClientSettings, "COBALT_EXECUTOR_*")


def store_context(settings: OrchestratorSettings | None = None) -> StoreContext:
    """The context of a command: `settings`, else the environment's (exits 2 on a bad one).

    Its database engine is disposed when the command ends, so a command run in a process
    that goes on (tests run commands in-process) leaves no connection open behind it.
    """
    context = StoreContext(settings=settings_or_exit() if settings is None else settings)
    command = get_current_context(silent=True)
    if command is not None:
        command.call_on_close(context.close)
    return context


@dataclass
class StoreContext:
    """What every orchestrator command needs; the database is opened on first use."""

    settings: OrchestratorSettings
    _engine: Engine | None = field(default=None, init=False)
    _sessions: sessionmaker[Session] | None = field(default=None, init=False)

    def sessions(self) -> sessionmaker[Session]:
        """Sessions on the upgraded database (exits 3 if it cannot be reached)."""
        if self._sessions is None:
            from cobalt.orchestrator.settings import default_database_url
            from cobalt.orchestrator.store.db import (
                check_sqlite_folder,
                make_engine,
                make_sessionmaker,
                upgrade_if_behind,
            )

            url = self.settings.database_url
            with handled():
                check_sqlite_folder(url, default_url=default_database_url())
                self._engine = make_engine(url)
                upgrade_if_behind(url, self._engine)
            self._sessions = make_sessionmaker(self._engine)
        return self._sessions

    def close(self) -> None:
        if self._engine is not None:
            self._engine.dispose()

    @property
    def database(self) -> str:
        """The database URL without its password, for messages."""
        from sqlalchemy import exc as sa_exc
        from sqlalchemy.engine import make_url

        try:
            return make_url(self.settings.database_url).render_as_string(hide_password=True)
        except sa_exc.ArgumentError:
            return "COBALT_DATABASE_URL"


def data_context(ctx: typer.Context) -> StoreContext:
    """The `cobalt data` group's context, for its commands wherever they are written."""
    context = ctx.find_object(StoreContext)
    if context is None:  # only when a command is invoked without the `data` group
        raise fail(EXIT_USAGE, "run this command as `cobalt data ...`")
    return context


@contextlib.contextmanager
def open_executor() -> Iterator[ExecutorClient]:
    """COBALT_EXECUTOR_URL's executor (checked ready), or a local one started for the command."""
    from cobalt.shared.clients import ExecutorClient, ExecutorClientSettings
    from cobalt.shared.clients.local_executor import local_executor

    try:
        settings = ExecutorClientSettings()
        client = ExecutorClient.from_settings(settings) if settings.url else None
    except (ValidationError, ValueError) as exc:
        raise fail(EXIT_USAGE, f"bad COBALT_EXECUTOR_* setting: {exc}") from exc
    if client is None:
        with handled(), local_executor() as local:
            yield local
        return
    with client:
        if not client.ready():
            raise fail(
                EXIT_UNREACHABLE,
                f"the executor at {client.base_url} is not ready (GET /readyz); start it or "
                "unset COBALT_EXECUTOR_URL to run a local one",
            )
        yield client


def progress_bar(*extra: ProgressColumn) -> Progress:
    """Bars on stderr (off when it is not a terminal), with `extra` columns at the end."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = Console(stderr=True)
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        *extra,
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def reward_tokenizer(given: Path | None) -> tuple[TokenizerCounter, Path] | None:
    """The reward's token counter: `given` (--tokenizer), else COBALT_REWARD_TOKENIZER,
    else COBALT_POLICY_TOKENIZER; None when none is set (the caller says what that means).
    A bad setting or a directory without tokenizer.json exits 2."""
    from cobalt.shared.reward import RewardSettings, TokenizerCounter

    if given is None:
        try:
            given = RewardSettings().tokenizer
        except ValidationError as exc:
            raise fail(EXIT_USAGE, f"bad COBALT_REWARD_/COBALT_POLICY_TOKENIZER: {exc}") from exc
    if given is None:
        return None
    with handled():
        return TokenizerCounter.from_path(given), given


def echo_json(value: Any) -> None:
    typer.echo(json.dumps(value, ensure_ascii=False, default=str))
