"""Exporting a dataset to a file: JSONL (optionally gzipped) or Parquet, by the suffix.

JSONL rows are exactly `ProblemRow` (docs/schemas/problem.schema.json), so an export
imports again with `cobalt data import --format jsonl` and yields the same problems.
The row schema forbids extra keys, which is why JSONL rows carry neither the dataset
name nor a perturbed problem's `perturbation` record.

Parquet rows are flat for tools such as Hugging Face `datasets`: the `ProblemRow`
columns, where the nested values (`public_tests`, `hidden_tests`, `source_metadata`) are
JSON strings, plus `dataset` and `perturbation` (a JSON string, or null).

Problems are read in id order, `batch_size` at a time, and written as they come (one
Parquet row group per batch), so memory does not grow with the dataset. The file is
written beside its destination and renamed into place at the end: a failed export leaves
no partial file.
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_datasets
from cobalt.orchestrator.store.models import Problem
from cobalt.shared.contracts import ProblemRow
from cobalt.shared.errors import InvalidInput, NotFound

__all__ = [
    "EXPORT_FORMATS",
    "ExportReport",
    "PARQUET_JSON_COLUMNS",
    "export_dataset",
    "export_format",
    "problem_row",
    "write_replacing",
]

EXPORT_FORMATS = {".jsonl": "jsonl", ".jsonl.gz": "jsonl", ".parquet": "parquet"}
"""File suffix -> what is written."""

PARQUET_JSON_COLUMNS = ("public_tests", "hidden_tests", "source_metadata", "perturbation")
"""Parquet columns that hold JSON text (decode with `json.loads`)."""

ROW_FIELDS = tuple(ProblemRow.model_fields)


@dataclass
class ExportReport:
    """What an export wrote."""

    dataset: str
    path: Path
    format: str
    rows: int = 0


def export_format(path: Path) -> str:
    """`jsonl` or `parquet`, from the file name.

    Raises:
        InvalidInput: the suffix is none of EXPORT_FORMATS.
    """
    name = path.name.lower()
    for suffix, fmt in EXPORT_FORMATS.items():
        if name.endswith(suffix) and len(name) > len(suffix):
            return fmt
    raise InvalidInput(
        f"cannot tell what to write from {path.name!r}: end the name with "
        f"{', '.join(EXPORT_FORMATS)}"
    )


def problem_row(problem: Problem) -> dict[str, Any]:
    """A stored problem as a `ProblemRow` dict (the JSONL export's row)."""
    return {name: getattr(problem, name) for name in ROW_FIELDS}


def _parquet_row(problem: Problem, dataset: str) -> dict[str, Any]:
    row = problem_row(problem)
    row["dataset"] = dataset
    row["perturbation"] = problem.perturbation
    for column in PARQUET_JSON_COLUMNS:
        if row[column] is not None:
            row[column] = json.dumps(row[column], ensure_ascii=False)
    return row


def _batches(session: Session, *, dataset_id: int, batch_size: int) -> Iterator[list[Problem]]:
    batch: list[Problem] = []
    for problem in repo_datasets.iter_problems(session, dataset_id=dataset_id, batch=batch_size):
        session.expunge(problem)  # rows are written once; keep the identity map small
        batch.append(problem)
        if len(batch) >= batch_size:
            yield batch
            batch = []
    if batch:
        yield batch


def _write_jsonl(out: IO[bytes], batches: Iterator[list[Problem]], *, gzipped: bool) -> int:
    rows = 0
    stream: IO[bytes] | gzip.GzipFile = gzip.GzipFile(fileobj=out, mode="wb") if gzipped else out
    for batch in batches:
        lines = [json.dumps(problem_row(problem), ensure_ascii=False) for problem in batch]
        stream.write(("\n".join(lines) + "\n").encode())
        rows += len(batch)
    if gzipped:
        stream.close()  # writes the gzip trailer; `out` stays open
    return rows


def _parquet_schema() -> Any:
    import pyarrow as pa

    string_columns = [
        "external_id",
        "statement",
        "starter_code",
        "test_style",
        "fn_name",
        "public_tests",
        "hidden_tests",
        "difficulty",
        "source_metadata",
        "dataset",
        "perturbation",
    ]
    return pa.schema([pa.field(name, pa.string()) for name in string_columns])


def _write_parquet(out: IO[bytes], batches: Iterator[list[Problem]], *, dataset: str) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _parquet_schema()
    rows = 0
    with pq.ParquetWriter(out, schema, compression="zstd") as writer:
        for batch in batches:
            table = pa.Table.from_pylist(
                [_parquet_row(problem, dataset) for problem in batch], schema=schema
            )
            writer.write_table(table)
            rows += len(batch)
        if rows == 0:
            writer.write_table(schema.empty_table())
    return rows


def export_dataset(
    *,
    sessions: sessionmaker[Session],
    name: str,
    out: Path,
    batch_size: int = 1000,
) -> ExportReport:
    """Write dataset `name` to `out` (JSONL, JSONL.gz or Parquet, by the suffix).

    Args:
        sessions: Where the dataset is.
        name: The dataset's name.
        out: The file to write (replaced if it exists); its directory must exist.
        batch_size: Problems read (and, for Parquet, written as one row group) at a time.

    Returns:
        The format written and the number of rows.

    Raises:
        InvalidInput: the suffix of `out` is unknown, or its directory does not exist.
        NotFound: no dataset is named `name`.
    """
    fmt = export_format(out)
    if not out.parent.is_dir():
        raise InvalidInput(f"cannot write {out}: directory {out.parent} does not exist")
    report = ExportReport(dataset=name, path=out, format=fmt)
    with sessions.begin() as session:
        dataset = repo_datasets.get_dataset(session, name=name)
        if dataset is None:
            raise NotFound(f"no dataset named {name!r}; `cobalt data list` shows them")
        batches = _batches(session, dataset_id=dataset.id, batch_size=batch_size)

        def write(handle: IO[bytes]) -> int:
            if fmt == "parquet":
                return _write_parquet(handle, batches, dataset=name)
            return _write_jsonl(handle, batches, gzipped=out.name.lower().endswith(".gz"))

        report.rows = write_replacing(out, write)
    return report


def write_replacing(out: Path, write: Callable[[IO[bytes]], int]) -> int:
    """`write` into a new file beside `out`, then that file renamed to `out`: a reader
    never sees half a file, and a failed write leaves `out` as it was.

    Returns:
        What `write` returned (the rows it wrote).

    Raises:
        InvalidInput: the directory of `out` does not exist.
    """
    if not out.parent.is_dir():
        raise InvalidInput(f"cannot write {out}: directory {out.parent} does not exist")
    # Not mkstemp: its 0600 mode would survive the rename; "x" keeps the umask's mode.
    temporary = out.parent / f".{out.name}.{secrets.token_hex(4)}.tmp"
    try:
        with temporary.open("xb") as handle:
            rows = write(handle)
        os.replace(temporary, out)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return rows
