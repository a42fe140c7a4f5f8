"""The `cobalt` command: one root with a sub-command per service or task.

Each distribution declares its commands as entry points in the `cobalt.commands` group
(`executor = "cobalt.executor.cli:executor_app"`), and the root imports one only when it
runs. So `cobalt --version` and `cobalt data --help` do not import the orchestrator's
database drivers, the OpenAI client or pyarrow, and an environment holding only some of the
distributions (the executor image: cobalt-shared and cobalt-executor) has exactly their
commands. `cobalt --help` lists every installed command with its one-line help, which loads
each command's module but none of the heavy libraries its commands use when they run.

A group's commands are its typer app's own and those declared into it by entry points
named `GROUP.NAME` (`"run.table" = "cobalt.orchestrator.results.cli:table"`), each also
imported only when it runs: this module alone assembles commands written in different
packages, so no command module registers another's, and `cobalt run list` imports neither
`cobalt run sample`'s module nor `cobalt run table`'s.
"""

from __future__ import annotations

import importlib.metadata
from functools import cache
from typing import Any

import typer
import typer.core
import typer.main
import typer.models

# typer 0.29 vendors click; its groups and commands are these classes, not the click
# distribution's.
from typer import _click as click

from cobalt.shared.cli import interrupted

__all__ = ["COMMAND_GROUP", "app", "group_commands", "installed_commands", "main"]

COMMAND_GROUP = "cobalt.commands"


@cache
def _declared() -> tuple[importlib.metadata.EntryPoint, ...]:
    return tuple(importlib.metadata.entry_points(group=COMMAND_GROUP))


def installed_commands() -> dict[str, importlib.metadata.EntryPoint]:
    """The commands that the installed distributions declare (`cobalt NAME`), by name."""
    return {point.name: point for point in _declared() if "." not in point.name}


def group_commands(group: str) -> dict[str, importlib.metadata.EntryPoint]:
    """The commands declared into `group` (entry points `GROUP.NAME`), by name, in the
    order their distributions declare them."""
    prefix = f"{group}."
    return {
        point.name.removeprefix(prefix): point
        for point in _declared()
        if point.name.startswith(prefix)
    }


def _command_from(target: Any, name: str) -> click.Command:
    """A click command from what an entry point names: a typer app or a plain function."""
    if isinstance(target, typer.Typer):
        # Always a group, so `cobalt executor serve` keeps its sub-command even when the
        # app holds a single one; its own commands, then those declared into it.
        command: click.Command = typer.main.get_group_from_info(
            typer.models.TyperInfo(target, cls=DeclaredCommands),
            pretty_exceptions_short=target.pretty_exceptions_short,
            rich_markup_mode=target.rich_markup_mode,
            suggest_commands=target.suggest_commands,
        )
    elif callable(target):
        single = typer.Typer()
        single.command(name)(target)
        command = typer.main.get_command(single)
    else:
        raise TypeError(f"entry point {name!r} names neither a typer app nor a function")
    # The entry point's name is the command's name (a one-command typer app would otherwise
    # be listed under its function's name).
    command.name = name
    return command


class DeclaredCommands(typer.core.TyperGroup):
    """A group whose commands are its typer app's own, then those its name's `GROUP.NAME`
    entry points declare, each imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        own = super().list_commands(ctx)
        return [*own, *(name for name in group_commands(self.name or "") if name not in own)]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        point = group_commands(self.name or "").get(cmd_name)
        if command is None and point is not None:
            command = _command_from(point.load(), cmd_name)
        return command


class LazyCommands(typer.core.TyperGroup):
    """A group whose sub-commands are entry points, imported on first use.

    Ctrl-C in any command ends it with "interrupted" and status 130 (click's own answer,
    "Aborted!" and status 1, says neither what happened nor matches the documented code).
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            raise interrupted() from None

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(installed_commands())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        point = installed_commands().get(cmd_name)
        if point is None:
            return None
        return _command_from(point.load(), cmd_name)


def _version(value: bool) -> None:
    if value:
        # Read here: the installed distribution's metadata costs every other command's start-up.
        from cobalt.shared.version import __version__

        typer.echo(f"cobalt {__version__}")
        raise typer.Exit()


app = typer.Typer(
    name="cobalt",
    cls=LazyCommands,
    help=(
        "Cobalt: train and evaluate LLMs on multi-turn code generation with execution "
        "feedback. Configuration comes from COBALT_* environment variables "
        "(docs/configuration.md lists them all)."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


@app.callback()
def root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Cobalt command line."""
    from cobalt.shared.help_format import fold_option_names

    fold_option_names()  # before any sub-command's --help is drawn


def main() -> None:
    """Entry point of the `cobalt` console script."""
    app()
