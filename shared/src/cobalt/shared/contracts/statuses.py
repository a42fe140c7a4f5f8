"""Every lifecycle state the system persists and exposes, as `str` enums.

They live in the contracts (not the ORM) so that the REST schema lists their values and
every service compares against the same names: the trainer, which cannot import the
orchestrator's store, reads a job's status as `TrainingJobStatus`. Being `str` enums they
store, serialise and compare as the plain strings they always were.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "RunKind",
    "RunStatus",
    "TrainingGroupStatus",
    "TrainingJobStatus",
    "TrajectoryStatus",
]


class RunKind(StrEnum):
    """What a run does."""

    SAMPLE = "sample"
    """Fresh multi-turn rollouts from the problem statement."""
    REFINE = "refine"
    """Rollouts that continue from turn 0 of a sample run (`Run.parent_run_id`)."""


class RunStatus(StrEnum):
    """Lifecycle of a run (transitions: cobalt.orchestrator.lifecycle)."""

    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    """The process carrying it out was stopped (Ctrl-C, SIGTERM); `cobalt run resume`
    continues it from the stored turns."""

    @property
    def is_final(self) -> bool:
        return self in (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED)

    @property
    def is_stopped(self) -> bool:
        """Nothing carries the run out any more: final, or interrupted (until resumed)."""
        return self.is_final or self is RunStatus.INTERRUPTED


class TrajectoryStatus(StrEnum):
    """Lifecycle of one trajectory."""

    PENDING = "pending"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"


class TrainingJobStatus(StrEnum):
    """Where a training job is (transitions: cobalt.orchestrator.lifecycle)."""

    PENDING = "pending"
    RUNNING = "running"
    STOPPED = "stopped"
    FINISHED = "finished"
    FAILED = "failed"

    @property
    def is_final(self) -> bool:
        return self in (
            TrainingJobStatus.STOPPED,
            TrainingJobStatus.FINISHED,
            TrainingJobStatus.FAILED,
        )


class TrainingGroupStatus(StrEnum):
    """What became of a scored group in the ledger."""

    READY = "ready"
    """Scored and stored, waiting for the trainer."""
    CONSUMED = "consumed"
    """Trained on, in step `TrainingGroup.step` (exactly once)."""
    STALE = "stale"
    """Sampled too many policy versions ago; dropped at step `step`, never trained on."""
    DROPPED = "dropped"
    """Fewer than two responses the sandbox could judge (the rest masked): never trained
    on, kept with its `drop_reason` and counted at step `step`."""
