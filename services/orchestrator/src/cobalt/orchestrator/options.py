"""Command options generated from the typed models, so that a setting's name, type,
default and help are written once, on its model's field (as prime-rl builds its command
line from its config): a new field is an option of every command that takes its model.

`model_options` adds one option per field of each `OptionGroup` to a typer command, and
hands the command each group's chosen values as one mapping (by field name). A group
either leaves unset options out (`unset=True`: the option defaults to None and the model,
or the service that validates the mapping, supplies the default; `--help` shows the
model's, or `[inherited]` for a field the service takes from elsewhere when unset), or
defaults every option to the model's default (`unset=False`). A required field is a
required option either way.

Everything here is pydantic and typer, which every command module loads anyway
(tests/test_cli_startup.py).
"""

from __future__ import annotations

import enum
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, Union, get_args, get_origin

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["SHOWN_INHERITED", "OptionGroup", "model_options", "shown_default"]

_Command = TypeVar("_Command", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class OptionGroup:
    """The fields of `model` as options; the command gets their values as `into`."""

    model: type[BaseModel]
    into: str
    """The command's keyword parameter that receives `{field name: value}`."""
    unset: bool = True
    """Options default to None and unset ones are left out (the model's default then
    applies); False: each option defaults to its field's default and is always passed."""
    inherited: frozenset[str] = frozenset()
    """Fields that, left unset, the service takes from elsewhere rather than from the
    model's default (a refine run: its sample run's): `--help` shows `[inherited]`. Only
    with `unset=True`, which alone tells a given option from one left out."""
    skip: frozenset[str] = frozenset()
    """Fields the command declares itself (or that are no option: nested models)."""
    names: Mapping[str, str] = field(default_factory=dict)
    """Field -> option name, where the command's option is named otherwise (its parameter
    keeps the field's name)."""
    envvars: Mapping[str, str] = field(default_factory=dict)
    """Field -> the environment variable an unset option reads."""
    deprecated: Mapping[str, str] = field(default_factory=dict)
    """Old option name -> field: still taken (hidden from `--help`), with a warning."""


SHOWN_INHERITED = r"\[inherited]"
"""What `--help` shows in place of the default of an `OptionGroup.inherited` option."""


def shown_default(value: Any) -> str:
    """A default as `--help` shows it: `[value]` (escaped, or rich reads it as markup)."""
    shown = ("on" if value else "off") if isinstance(value, bool) else str(value)
    if isinstance(value, enum.Enum):
        shown = str(value.value)
    return rf"\[{shown}]"


def _cli_type(annotation: Any) -> tuple[Any, str] | None:
    """The type typer parses an option as and what the help adds (Literal choices); None
    for a type no option can carry (a mapping, a nested model)."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        if len(members) != 1:
            return None
        annotation = members[0]
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) is Literal:
        return str, f" (one of {', '.join(map(str, get_args(annotation)))})"
    if get_origin(annotation) is list and _cli_type(get_args(annotation)[0]) == (str, ""):
        return list[str], " (repeatable)"
    if annotation in (bool, int, float, str, Path) or (
        isinstance(annotation, type) and issubclass(annotation, enum.Enum)
    ):
        return annotation, ""
    return None


def _help(info: FieldInfo, default: Any, extra: str, *, inherited: bool = False) -> str:
    text = re.sub(r"\s+", " ", info.description or "").strip()
    shown = "" if default is None else f" {shown_default(default)}"
    if inherited:
        shown = f" {SHOWN_INHERITED}"
    return f"{text}{extra}{shown}".strip()


@dataclass(frozen=True, slots=True)
class _Generated:
    parameter: str
    group: OptionGroup
    field: str
    replaces: str | None = None
    """For a deprecated spelling: the option that replaces it."""


def _option_parameters(group: OptionGroup) -> list[tuple[inspect.Parameter, _Generated]]:
    if (group.inherited and not group.unset) or group.inherited - set(group.model.model_fields):
        raise TypeError(
            f"{group.model.__name__}: inherited options need unset=True and must be fields "
            f"({sorted(group.inherited)})"
        )
    made = []
    for name, info in group.model.model_fields.items():
        option_type = _cli_type(info.annotation)
        if name in group.skip or option_type is None:
            continue  # a field no option carries: tests/orchestrator/test_cli_defaults.py
        cli_type, extra = option_type
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        option = group.names.get(name, name).replace("_", "-")
        declarations = [f"--{option}/--no-{option}" if cli_type is bool else f"--{option}"]
        typer_option = typer.Option(
            *declarations,
            help=_help(info, default, extra, inherited=name in group.inherited),
            envvar=group.envvars.get(name),
            show_default=False,
        )
        required = info.is_required()
        parameter_default: Any = (
            inspect.Parameter.empty if required else None if group.unset else default
        )
        annotation = cli_type if required or not group.unset else cli_type | None
        parameter = name
        made.append(
            (
                inspect.Parameter(
                    parameter,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=parameter_default,
                    annotation=Annotated[annotation, typer_option],
                ),
                _Generated(parameter, group, name),
            )
        )
    made.sort(key=lambda pair: pair[0].default is not inspect.Parameter.empty)  # required first
    for old, name in group.deprecated.items():
        option_type = _cli_type(group.model.model_fields[name].annotation)
        assert option_type is not None, f"--{old}: {name} is no option"
        cli_type, _ = option_type
        new = group.names.get(name, name).replace("_", "-")
        typer_option = typer.Option(f"--{old}", hidden=True, help=f"Deprecated: --{new}.")
        parameter = old.replace("-", "_")
        made.append(
            (
                inspect.Parameter(
                    parameter,
                    inspect.Parameter.KEYWORD_ONLY,
                    default=None,
                    annotation=Annotated[cli_type | None, typer_option],
                ),
                _Generated(parameter, group, name, replaces=new),
            )
        )
    return made


def model_options(*groups: OptionGroup) -> Callable[[_Command], _Command]:
    """Add each group's fields as options to a typer command (apply before `@app.command`).

    The command declares a keyword parameter per group (`group.into`, a
    `dict[str, Any]`; the options stand there in `--help`) and its own options; a
    generated option named like one of them is a mistake in the code and raised here.
    """

    def decorate(command: _Command) -> _Command:
        signature = inspect.signature(command)
        hints = typing.get_type_hints(command, include_extras=True)
        intos = {group.into for group in groups}
        own = list(signature.parameters.values())
        place = min(i for i, parameter in enumerate(own) if parameter.name in intos)
        kept = [
            parameter.replace(
                kind=inspect.Parameter.KEYWORD_ONLY,  # typer reads names, not positions
                annotation=hints.get(parameter.name, parameter.annotation),
            )
            for parameter in own
            if parameter.name not in intos
        ]
        generated = [made for group in groups for made in _option_parameters(group)]
        taken = [p.name for p in kept] + [p.name for p, _ in generated]
        clashes = sorted({name for name in taken if taken.count(name) > 1})
        if clashes:
            raise TypeError(f"{command.__name__}: options declared twice: {clashes}")

        @functools.wraps(command)
        def with_options(**kwargs: Any) -> Any:
            chosen: dict[str, dict[str, Any]] = {group.into: {} for group in groups}
            for _, made in generated:
                value = kwargs.pop(made.parameter)
                if value is None or value == []:
                    continue
                if made.replaces is not None:
                    typer.echo(
                        f"warning: --{made.parameter.replace('_', '-')} is deprecated; "
                        f"use --{made.replaces} (the same setting)",
                        err=True,
                    )
                chosen[made.group.into][made.field] = value
            return command(**kwargs, **chosen)

        # The generated options stand where the command declares their groups.
        parameters = [*kept[:place], *(p for p, _ in generated), *kept[place:]]
        with_options.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        with_options.__annotations__ = {p.name: p.annotation for p in parameters}
        return typing.cast(_Command, with_options)

    return decorate
