"""What every `cobalt` command group shares: exit statuses, one-line errors, and what
Ctrl-C does.

Exit statuses of every command (docs/cli.md lists them for users):
    0  done
    1  the command ran but its work did not succeed (see each command)
    2  usage: bad arguments, unknown names, bad settings
    3  a service (database, executor, model endpoint, Redis) cannot be reached
    130  interrupted (Ctrl-C, SIGTERM)

Ctrl-C anywhere ends the command with "interrupted" on stderr and status 130 (the root
command turns the KeyboardInterrupt into that, `cobalt.shared.commands`). A long command
that has work in flight also wraps it in `stopping_on_signals`, whose callback stops that
work at once (cancels model calls, lets go of jobs) before the KeyboardInterrupt unwinds
the command; the command then records what it left (a run `interrupted`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType
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
    "interrupted",
    "settings_or_exit",
    "stopping_on_signals",
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


def interrupted(message: str = "") -> typer.Exit:
    """Print "interrupted" (and what was left, if `message`) and return the exit (130)."""
    typer.echo(f"interrupted{': ' + message if message else ''}", err=True)
    return typer.Exit(EXIT_INTERRUPTED)


@contextlib.contextmanager
def stopping_on_signals(on_stop: Callable[[], None]) -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM call `on_stop` at once, then raise
    KeyboardInterrupt in the main thread (the block unwinds and cleans up).

    `on_stop` runs in the signal handler, so it must only flag and schedule (cancel tasks
    on an event loop, set an event), never block. A second signal while the command cleans
    up quits at once (status 130) without cleaning up. Outside the main thread (a command
    run by a test in a thread) nothing is installed.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    stopping = False

    def handle(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            os.write(2, b"interrupted again: quitting without cleaning up\n")
            os._exit(EXIT_INTERRUPTED)
        stopping = True
        on_stop()
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
