"""Reading raw rows from the files users download: JSONL (optionally gzipped), JSON
arrays and Parquet, one dict at a time with its 1-based row number."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cobalt.shared.errors import InvalidInput

__all__ = ["BadRow", "count_records", "read_records"]


@dataclass(frozen=True)
class BadRow:
    """A row that could not become a problem, and why. Reported, counted, skipped."""

    row: int
    reason: str
    external_id: str | None = None


def _suffixes(path: Path) -> list[str]:
    return [s.lower() for s in path.suffixes]


def read_records(path: Path) -> Iterator[tuple[int, dict[str, Any] | BadRow]]:
    """Yield (row number, record) pairs; a line that is not a JSON object is a BadRow.

    Raises:
        InvalidInput: the file does not exist or its format is unknown.
    """
    if not path.is_file():
        raise InvalidInput(f"no such file: {path}")
    suffixes = _suffixes(path)
    if ".parquet" in suffixes:
        yield from _read_parquet(path)
    elif ".jsonl" in suffixes or ".ndjson" in suffixes:
        yield from _read_jsonl(path)
    elif suffixes and suffixes[-1] in (".json", ".gz") and ".json" in suffixes:
        yield from _read_json_array(path)
    else:
        raise InvalidInput(
            f"cannot tell the format of {path.name}: use .jsonl, .jsonl.gz, .json or .parquet"
        )


def _open_text(path: Path) -> Any:
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def _read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any] | BadRow]]:
    with _open_text(path) as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as exc:
                yield number, BadRow(number, f"not valid JSON: {exc}")
                continue
            if not isinstance(record, dict):
                yield number, BadRow(number, "a row must be a JSON object")
                continue
            yield number, record


def _read_json_array(path: Path) -> Iterator[tuple[int, dict[str, Any] | BadRow]]:
    with _open_text(path) as text:
        try:
            records = json.load(text)
        except ValueError as exc:
            raise InvalidInput(f"{path.name} is not valid JSON: {exc}") from exc
    if not isinstance(records, list):
        raise InvalidInput(f"{path.name} must hold a JSON array of rows")
    for number, record in enumerate(records, start=1):
        if isinstance(record, dict):
            yield number, record
        else:
            yield number, BadRow(number, "a row must be a JSON object")


def _read_parquet(path: Path) -> Iterator[tuple[int, dict[str, Any] | BadRow]]:
    import pyarrow.parquet as pq

    number = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=1000):
        for record in batch.to_pylist():
            number += 1
            yield number, record


def count_records(path: Path) -> int | None:
    """Rows in the file, cheaply where possible (for a progress bar's total)."""
    suffixes = _suffixes(path)
    if ".parquet" in suffixes:
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    if ".jsonl" in suffixes or ".ndjson" in suffixes:
        with _open_text(path) as lines:
            return sum(1 for line in lines if line.strip())
    return None
