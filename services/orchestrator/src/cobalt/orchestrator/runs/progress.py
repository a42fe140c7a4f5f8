"""A run's live progress in the terminal, read from the database: how a command that
started a run (or waits for one on the queue's workers) shows it until it stops.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from cobalt.orchestrator.console import progress_bar
from cobalt.shared.contracts.statuses import RunStatus, TrajectoryStatus

if TYPE_CHECKING:
    from sqlalchemy.orm import Session, sessionmaker

    from cobalt.shared.contracts.runs import RunPublic

__all__ = ["RUN_STOPPED", "RunProgress", "wait_for_run"]


class RunProgress:
    """Progress bars fed from the database: trajectories done and failed, tokens/s."""

    def __init__(self, sessions: sessionmaker[Session], run_id: int, *, quiet: bool) -> None:
        from rich.progress import TextColumn

        self.sessions, self.run_id = sessions, run_id
        self.bars = progress_bar(TextColumn("{task.fields[extra]}"))
        self.started = time.monotonic()
        if quiet:
            self.bars.disable = True

    def __enter__(self) -> RunProgress:
        from cobalt.orchestrator.store import repo_runs

        self.bars.__enter__()
        with self.sessions() as session:
            total = repo_runs.get_run(session, run_id=self.run_id).total_trajectories
        self.task = self.bars.add_task(f"run {self.run_id}", total=total, extra="")
        return self

    def refresh(self) -> None:
        self()

    def __call__(self) -> str:
        """Update the bars from the database; returns the run's status."""
        from cobalt.orchestrator.runs import service
        from cobalt.orchestrator.store import repo_runs

        with self.sessions() as session:
            progress = repo_runs.run_progress(session, run_id=self.run_id)
            tokens = service.completion_tokens(session, self.run_id)
        done = progress.trajectories.get(TrajectoryStatus.FINISHED, 0)
        failed = progress.trajectories.get(TrajectoryStatus.FAILED, 0)
        rate = tokens / max(1e-9, time.monotonic() - self.started)
        self.bars.update(
            self.task,
            completed=done + failed,
            extra=f"{failed} failed · {progress.turns} turns · {rate:,.0f} tok/s",
        )
        return progress.status

    def __exit__(self, *exc: object) -> None:
        self.bars.__exit__(None, None, None)


RUN_STOPPED = (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED)
"""The statuses a run's jobs no longer change: waiting for it ends there."""


def wait_for_run(sessions: sessionmaker[Session], run_id: int, *, quiet: bool) -> RunPublic:
    """Show the run's progress until its jobs stop changing it (queued work)."""
    from cobalt.orchestrator.runs import service

    with RunProgress(sessions, run_id, quiet=quiet) as tick:
        while tick() not in RUN_STOPPED:
            time.sleep(1.0)
    return service.run_public(sessions, run_id)
