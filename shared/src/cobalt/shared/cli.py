"""What every `cobalt` command group shares: exit statuses and one-line errors.

Exit statuses of every command:
    0  done
    1  the command ran but its work did not succeed (see each command)
    2  usage: bad arguments, unknown names, bad settings
    3  a service (database, executor, model endpoint, Redis) cannot be reached
    130  interrupted (Ctrl-C)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import typer
from pydantic import ValidationError

from cobalt.shared.errors import first_validation_error

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "fail",
    "settings_or_exit",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130

_Settings = TypeVar("_Settings")


def fail(code: int, message: str) -> typer.Exit:
    """Print `message` as one line to stderr and return the exit to raise."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code)


def settings_or_exit(make: Callable[[], _Settings], variables: str) -> _Settings:
    """Settings from the environment, or exit 2 naming the bad `variables` (e.g. COBALT_*)."""
    try:
        return make()
    except ValidationError as exc:
        raise fail(EXIT_USAGE, f"bad {variables} setting {first_validation_error(exc)}") from exc
