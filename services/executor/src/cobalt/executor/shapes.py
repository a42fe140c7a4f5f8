"""Big request bodies decoded in the shape of their model, so that an invalid one is
refused before its values are built.

A JSON body decodes into Python objects many times its size (an empty list is 3 bytes of
text and 72 bytes of memory): 28 MiB of `[]` in a field no model has held ~900 MiB in a
parser process before validation could say "unknown field". Here the objects the model
knows (the request, its tests, a batch's requests) are walked top-down; a value is
decoded (by the C decoder) only once its place is known to take it. Refused as they are
met, with pydantic's own error types and without decoding the value:
- a list or object under a key the model does not have (a string or a number there is
  decoded, so that the model's own validators can explain it, e.g. "rename 'input'");
- a list or object where the model wants a string;
- a list of models longer than its `max_length`.
What passes is validated by the model as before. Values the model types `Any` (a call
test's arguments) are decoded as they are; the parser process's memory limit
(`bodies.PARSER_MEMORY_BYTES`) bounds what those can cost.
"""

from __future__ import annotations

import json
import json.scanner
import re
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Union

from annotated_types import MaxLen
from pydantic import BaseModel

from cobalt.executor.values import parse_int

__all__ = ["Refused", "Shape", "decode_shaped", "shape_of"]

Kind = Literal["any", "str", "model", "models"]


class Refused(Exception):
    """The body does not fit its model: pydantic-style error records (`loc`, `type`,
    `msg`), the body's part of `loc` left to the caller."""

    def __init__(self, loc: tuple[Any, ...], kind: str, msg: str) -> None:
        super().__init__(msg)
        self.errors = [{"type": kind, "loc": loc, "msg": msg}]


@dataclass(frozen=True)
class Field:
    kind: Kind
    shape: Shape | None = None
    max_length: int | None = None


@dataclass(frozen=True)
class Shape:
    fields: dict[str, Field] = field(default_factory=dict)
    closed: bool = False
    """Unknown keys are refused (the model forbids extra fields)."""


def _models_in(annotation: Any) -> list[type[BaseModel]] | None:
    """The model classes `annotation` is (a model, or a union of models), else None."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if typing.get_origin(annotation) in (Union, types.UnionType):
        members = [_models_in(member) for member in typing.get_args(annotation)]
        if all(members):
            return [model for found in members if found for model in found]
    return None


def shape_of(*models: type[BaseModel]) -> Shape:
    """The shape of `models` (several: a union; a key is known if any member has it)."""
    fields: dict[str, Field] = {}
    closed = all(model.model_config.get("extra") == "forbid" for model in models)
    for model in models:
        for name, info in model.model_fields.items():
            key = info.alias or name
            found = _field(info.annotation, info.metadata)
            if fields.setdefault(key, found) != found:
                fields[key] = Field("any")  # the members disagree: let the model decide
    return Shape(fields, closed)


def _field(annotation: Any, metadata: list[Any]) -> Field:
    if annotation is str:
        return Field("str")
    models = _models_in(annotation)
    if models is not None:
        return Field("model", shape_of(*models))
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        models = _models_in(item)
        if models is not None:
            limit = next((m.max_length for m in metadata if isinstance(m, MaxLen)), None)
            return Field("models", shape_of(*models), limit)
    return Field("any")


_DECODER = json.JSONDecoder(parse_int=parse_int)
_SCAN: Callable[[str, int], tuple[Any, int]] = json.scanner.make_scanner(_DECODER)  # type: ignore[arg-type]
_WHITESPACE = re.compile(r"[ \t\n\r]*")


def decode_shaped(text: str, shape: Shape) -> Any:
    """Decode the JSON `text` as `loads_value` does, walking `shape` top-down.

    Raises:
        Refused: the body does not fit the shape (see the module docstring).
        ValueError: not JSON, or nested too deeply to decode.
    """
    try:
        value, end = _Walk(text).object(_skip(text, 0), shape, ())
    except RecursionError as exc:
        raise ValueError("the value is nested too deeply") from exc
    except StopIteration as exc:
        raise ValueError(f"expecting a value at char {exc.value}") from None
    except IndexError:
        raise ValueError("unexpected end of the body") from None
    if _skip(text, end) != len(text):
        raise ValueError(f"extra data at char {end}")
    return value


def _skip(text: str, at: int) -> int:
    match = _WHITESPACE.match(text, at)
    assert match is not None  # the pattern matches the empty string
    return match.end()


class _Walk:
    def __init__(self, text: str) -> None:
        self.text = text
        self.scan: Callable[[str, int], tuple[Any, int]] = _SCAN

    def value(self, at: int) -> tuple[Any, int]:
        return self.scan(self.text, at)

    def object(self, at: int, shape: Shape, loc: tuple[Any, ...]) -> tuple[Any, int]:
        text = self.text
        if text[at] != "{":
            return self.value(at)  # not an object: the model says what it should be
        found: dict[str, Any] = {}
        at = _skip(text, at + 1)
        if text[at] == "}":
            return found, at + 1
        while True:
            if text[at] != '"':
                raise ValueError(f"expecting a property name at char {at}")
            key, at = self.value(at)
            at = _skip(text, at)
            if text[at] != ":":
                raise ValueError(f"expecting ':' at char {at}")
            at = _skip(text, at + 1)
            found[key], at = self.field(at, shape, key, (*loc, key))
            at = _skip(text, at)
            if text[at] == "}":
                return found, at + 1
            if text[at] != ",":
                raise ValueError(f"expecting ',' or '}}' at char {at}")
            at = _skip(text, at + 1)

    def field(self, at: int, shape: Shape, key: str, loc: tuple[Any, ...]) -> tuple[Any, int]:
        known = shape.fields.get(key)
        container = self.text[at] in "[{"
        if known is None:
            if shape.closed and container:
                raise Refused(loc, "extra_forbidden", "Extra inputs are not permitted")
            return self.value(at)
        if known.kind == "str" and container:
            raise Refused(loc, "string_type", "Input should be a valid string")
        if known.kind == "model" and known.shape is not None:
            return self.object(at, known.shape, loc)
        if known.kind == "models" and known.shape is not None and self.text[at] == "[":
            return self.models(at, known, loc)
        return self.value(at)

    def models(self, at: int, known: Field, loc: tuple[Any, ...]) -> tuple[Any, int]:
        assert known.shape is not None
        text = self.text
        items: list[Any] = []
        at = _skip(text, at + 1)
        if text[at] == "]":
            return items, at + 1
        while True:
            if known.max_length is not None and len(items) >= known.max_length:
                message = f"List should have at most {known.max_length} items"
                raise Refused(loc, "too_long", message)
            item, at = self.object(at, known.shape, (*loc, len(items)))
            items.append(item)
            at = _skip(text, at)
            if text[at] == "]":
                return items, at + 1
            if text[at] != ",":
                raise ValueError(f"expecting ',' or ']' at char {at}")
            at = _skip(text, at + 1)
