"""Progress of the demo's stages: rich bars on a terminal, one plain line per stage elsewhere.

Every stage is timed whether or not bars are shown, so the report can say where the
minutes went.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

__all__ = ["DemoProgress", "StageBar"]


@dataclass
class StageBar:
    """One stage's bar; `update` moves it (a no-op when bars are off)."""

    progress: Progress | None
    task: TaskID | None
    note: str = ""

    def update(
        self, *, completed: float | None = None, total: float | None = None, note: str = ""
    ) -> None:
        self.note = note or self.note
        if self.progress is None or self.task is None:
            return
        fields: dict[str, object] = {"note": self.note}
        if completed is not None:
            fields["completed"] = completed
        if total is not None:
            fields["total"] = total
        self.progress.update(self.task, **fields)  # type: ignore[arg-type]


@dataclass
class DemoProgress:
    """The demo's display on stderr; `stage` times a step and shows its bar."""

    console: Console = field(default_factory=lambda: Console(stderr=True))
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds per finished stage, in order."""
    _bars: Progress | None = field(default=None, init=False)

    def __enter__(self) -> DemoProgress:
        if self.console.is_terminal:
            self._bars = Progress(
                SpinnerColumn(finished_text="[green]✓"),
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[note]}"),
                console=self.console,
            )
            self._bars.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._bars is not None:
            self._bars.__exit__(kind, value, traceback)
            self._bars = None

    @contextlib.contextmanager
    def stage(self, description: str, total: float | None = None) -> Iterator[StageBar]:
        """Time a stage; on a terminal show its bar, otherwise print a line when it ends."""
        task = (
            self._bars.add_task(description, total=total, note="")
            if self._bars is not None
            else None
        )
        bar = StageBar(self._bars, task)
        started = time.monotonic()
        yield bar
        seconds = time.monotonic() - started
        self.timings[description] = seconds
        if self._bars is not None and task is not None:
            shown = next(t for t in self._bars.tasks if t.id == task)
            finished = shown.total or 1
            self._bars.update(task, total=finished, completed=finished)
        else:
            note = f"  {bar.note}" if bar.note else ""
            self.console.print(f"✓ {description} ({seconds:.1f} s){note}", highlight=False)

    def say(self, message: str) -> None:
        """A line above the bars (or on its own without them)."""
        self.console.print(message, highlight=False)
