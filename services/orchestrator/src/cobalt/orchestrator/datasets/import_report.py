"""How an import's outcome is shown: the table and the JSON object that `cobalt data
import` and `cobalt data generate` print, and the executor their references run on.

One module for both commands, so a generated dataset's import reads like any other.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from cobalt.orchestrator.console import open_executor

if TYPE_CHECKING:
    from cobalt.orchestrator.datasets.importing import Executor, ImportReport
    from cobalt.orchestrator.datasets.records import BadRow

__all__ = ["FIRST_BAD_ROWS", "import_executor", "print_import", "report_json"]

FIRST_BAD_ROWS = 5
"""Row numbers shown per bad-row reason."""

REASONS_SHOWN = 20
"""Bad-row reasons listed in the import table (`--json` lists them all)."""


@contextlib.contextmanager
def import_executor(verify: bool) -> Iterator[Executor | None]:
    """The executor for --verify: COBALT_EXECUTOR_URL's, or a local process."""
    if not verify:
        yield None
        return
    with open_executor() as executor:
        yield executor


def _bad_groups(bad: list[BadRow]) -> list[dict[str, Any]]:
    """Bad rows grouped by reason, most frequent first, with their first row numbers."""
    groups: dict[str, list[int]] = defaultdict(list)
    for row in bad:
        groups[row.reason].append(row.row)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    return [
        {"reason": reason, "count": len(rows), "rows": rows[:FIRST_BAD_ROWS]}
        for reason, rows in ordered
    ]


def report_json(report: ImportReport, fmt: str) -> dict[str, Any]:
    """The import's outcome as one JSON object (`--json`)."""
    return {
        "dataset": report.dataset,
        "format": fmt,
        "read": report.read,
        "inserted": report.inserted,
        "unchanged": report.unchanged,
        "bad": len(report.bad),
        "bad_reasons": _bad_groups(report.bad),
        "without_public_tests": len(report.without_public_tests),
        "without_public_tests_ids": report.without_public_tests,
    }


def print_import(report: ImportReport, fmt: str) -> None:
    """The import's outcome as tables: the counts, then the bad rows by reason."""
    console = Console(highlight=False)
    summary = Table(title=f"import into {report.dataset} ({fmt})", title_justify="left")
    for column in ("read", "inserted", "unchanged", "bad"):
        summary.add_column(column, justify="right")
    summary.add_row(
        str(report.read), str(report.inserted), str(report.unchanged), str(len(report.bad))
    )
    console.print(summary)
    if report.without_public_tests:
        ids = report.without_public_tests
        shown = ", ".join(ids[:REASONS_SHOWN]) + (", ..." if len(ids) > REASONS_SHOWN else "")
        console.print(
            f"{len(ids)} problems have no public test (their feedback says that no public "
            f"test ran): {shown}",
            markup=False,
        )
    if not report.bad:
        return
    reasons = Table(title="bad rows by reason", title_justify="left")
    reasons.add_column("rows", justify="right")
    reasons.add_column("reason", overflow="fold")
    reasons.add_column("first rows")
    groups = _bad_groups(report.bad)
    for group in groups[:REASONS_SHOWN]:
        first = ", ".join(str(row) for row in group["rows"])
        more = ", ..." if group["count"] > len(group["rows"]) else ""
        reasons.add_row(str(group["count"]), group["reason"], first + more)
    if len(groups) > REASONS_SHOWN:
        hidden = sum(group["count"] for group in groups[REASONS_SHOWN:])
        reasons.add_row(str(hidden), f"... {len(groups) - REASONS_SHOWN} more reasons (--json)", "")
    console.print(reasons)
