"""The `cobalt` command run in this process (typer's CliRunner), for tests of argument
handling: bad options, missing arguments, usage exits, help text.

A subprocess pays the interpreter's start and every import for each call; a test that only
checks what the command says about its arguments does not need a process of its own.
Tests where the process boundary is the point (kill -9, workers, `cobalt up`, servers,
re-executing in another environment) keep using `tests.support.runs.cobalt`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from typer.testing import CliRunner

from cobalt.shared.commands import app


@dataclass(frozen=True)
class Invoked:
    """What a run of the command left: the fields of `subprocess.CompletedProcess` that
    tests read, so a test reads the same whether the command ran here or in a process."""

    returncode: int
    stdout: str
    stderr: str


def cobalt_here(env: dict[str, str], *args: str) -> Invoked:
    """`cobalt ARGS` in this process, its environment exactly `env` while it runs (as
    `tests.support.runs.cobalt` gives it to a subprocess); restored afterwards.

    An exception the command did not turn into an exit status is raised here, with its
    traceback, rather than read as exit status 1.
    """
    variables: dict[str, str | None] = {name: None for name in os.environ if name not in env}
    variables.update(env)
    result = CliRunner().invoke(app, list(args), env=variables)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return Invoked(result.exit_code, result.stdout, result.stderr)
