"""Data access for rollout runs: create one, read it (with a row lock before a status is
decided), list them, move their status through the lifecycle, and count their progress.
Callers own the transaction.

A run's trajectories are in `repo_trajectories`, its turns in `repo_turns`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from cobalt.orchestrator.lifecycle import (
    is_run_move,
)
from cobalt.orchestrator.store.errors import parse_choice
from cobalt.orchestrator.store.models import (
    Run,
    RunKind,
    RunStatus,
    Trajectory,
    TrajectoryStatus,
    Turn,
)
from cobalt.orchestrator.store.times import utc_now
from cobalt.shared.contracts.runs import RunParams
from cobalt.shared.errors import Conflict, InvalidInput, NotFound

__all__ = [
    "PARENT_KIND",
    "RunProgress",
    "create_run",
    "get_run",
    "list_runs",
    "run_progress",
    "run_status",
    "runs_progress",
    "set_run_status",
]


TERMINAL_RUN_STATUSES = frozenset({RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED})
"""Statuses after which a run gets its `finished_at`."""


@dataclass(frozen=True, slots=True)
class RunProgress:
    """How far a run has got: trajectories by status and turns written."""

    run_id: int
    status: str
    total_trajectories: int
    trajectories: dict[str, int] = field(default_factory=dict)
    """Count per `TrajectoryStatus`, every status present (0 when none)."""
    turns: int = 0
    policy_versions: tuple[int, ...] = ()
    """The trainer's weights versions that wrote its turns, sorted (none: not Cobalt's
    inference service); what tells a run before training from one after."""


def get_run(session: Session, *, run_id: int, lock: bool = False) -> Run:
    """The run `run_id`; with `lock`, its row is locked until the transaction ends and the
    status read is the latest committed one.

    Lock before deciding a status change on what the run is now: two jobs of a run can end
    together, and without the lock both see "running" and the second one's move fails.
    A no-op UPDATE takes the lock on both stores (SQLite ignores SELECT ... FOR UPDATE but
    grants one writer at a time).

    Raises:
        NotFound: there is no such run.
    """
    if lock:
        session.execute(update(Run).where(Run.id == run_id).values(id=Run.id))
        run = session.get(Run, run_id, populate_existing=True)
    else:
        run = session.get(Run, run_id)
    if run is None:
        raise NotFound(
            f"run {run_id} does not exist; list the runs to find the id you meant",
            detail={"run_id": run_id},
        )
    return run


def run_status(session: Session, *, run_id: int) -> str:
    """The status of run `run_id`, read without loading the run (a job asks every turn).

    Raises:
        NotFound: there is no such run.
    """
    status = session.scalar(select(Run.status).where(Run.id == run_id))
    if status is None:
        raise NotFound(f"run {run_id} does not exist", detail={"run_id": run_id})
    return str(status)


def list_runs(session: Session, *, limit: int = 50) -> list[Run]:
    """The `limit` most recent runs, newest first."""
    return list(session.scalars(select(Run).order_by(Run.id.desc()).limit(limit)))


PARENT_KIND: dict[RunKind, RunKind | None] = {
    RunKind.SAMPLE: None,
    RunKind.REFINE: RunKind.SAMPLE,
}
"""The kind of run each kind continues (None: it starts from the problem statement)."""


def create_run(
    session: Session,
    *,
    kind: str,
    dataset_id: int,
    base_url: str,
    model: str,
    params: RunParams,
    template_name: str,
    template_sha256: str,
    total_trajectories: int = 0,
    parent_run_id: int | None = None,
) -> Run:
    """Add a pending run.

    Args:
        kind: a `RunKind`; a refine run needs `parent_run_id`, a sample run must not
            have one.
        params: the decoding and loop settings (n, temperature, turns, ...).
        total_trajectories: problems x n, the denominator of progress.

    Raises:
        InvalidInput: unknown kind, or a parent that does not fit the kind.
        NotFound: `parent_run_id` names no run.
    """
    try:
        run_kind = RunKind(kind)
    except ValueError as exc:
        choices = ", ".join(k.value for k in RunKind)
        raise InvalidInput(f"unknown run kind {kind!r}; use one of: {choices}") from exc
    parent_kind = PARENT_KIND[run_kind]
    if parent_kind is None and parent_run_id is not None:
        raise InvalidInput(f"a {run_kind} run starts from the statement; drop parent_run_id")
    if parent_kind is not None:
        if parent_run_id is None:
            raise InvalidInput(
                f"a {run_kind} run needs parent_run_id, the {parent_kind} run it continues"
            )
        parent = get_run(session, run_id=parent_run_id)
        if parent.kind != parent_kind:
            raise InvalidInput(
                f"run {parent_run_id} is a {parent.kind} run; a {run_kind} run starts from a "
                f"{parent_kind} run's turns"
            )
    run = Run(
        kind=run_kind.value,
        status=RunStatus.PENDING.value,
        dataset_id=dataset_id,
        parent_run_id=parent_run_id,
        base_url=base_url,
        model=model,
        params=params,
        template_name=template_name,
        template_sha256=template_sha256,
        total_trajectories=total_trajectories,
    )
    session.add(run)
    session.flush()
    return run


def set_run_status(session: Session, *, run_id: int, status: str, error: str | None = None) -> Run:
    """Move a run to `status`, stamping the times.

    `started_at` is set the first time the run runs (a resumed run keeps it);
    `finished_at` is set on every terminal status and cleared when the run runs again.
    `error` replaces the stored one, so a run that runs again loses its old error.

    Raises:
        InvalidInput: unknown status.
        NotFound: there is no such run.
        Conflict: no lifecycle event moves the run from its status to `status`.
    """
    new = parse_choice(RunStatus, status, "run status")
    run = get_run(session, run_id=run_id, lock=True)
    if not is_run_move(run.status, new):
        raise Conflict(f"run {run_id} cannot go from {run.status} to {new}")
    run.status = new.value
    run.error = error
    if new is RunStatus.RUNNING:
        run.started_at = run.started_at or utc_now()
        run.finished_at = None
    elif new in TERMINAL_RUN_STATUSES:
        run.finished_at = utc_now()
    session.flush()
    return run


def run_progress(session: Session, *, run_id: int) -> RunProgress:
    """Trajectories per status and turns written for a run.

    Raises:
        NotFound: there is no such run.
    """
    return runs_progress(session, runs=[get_run(session, run_id=run_id)])[run_id]


def runs_progress(session: Session, *, runs: Sequence[Run]) -> dict[int, RunProgress]:
    """`run_progress` of many runs in two queries (not two per run), by run id."""
    ids = [run.id for run in runs]
    counts = {run_id: {status.value: 0 for status in TrajectoryStatus} for run_id in ids}
    turns = dict.fromkeys(ids, 0)
    versions: dict[int, set[int]] = {run_id: set() for run_id in ids}
    if ids:
        for run_id, status, count in session.execute(
            select(Trajectory.run_id, Trajectory.status, func.count(Trajectory.id))
            .where(Trajectory.run_id.in_(ids))
            .group_by(Trajectory.run_id, Trajectory.status)
        ):
            counts[run_id][status] = int(count)
        for run_id, version, count in session.execute(
            select(Turn.run_id, Turn.policy_version, func.count(Turn.id))
            .where(Turn.run_id.in_(ids))
            .group_by(Turn.run_id, Turn.policy_version)
        ):
            turns[run_id] += int(count)
            if version is not None:
                versions[run_id].add(int(version))
    return {
        run.id: RunProgress(
            run_id=run.id,
            status=run.status,
            total_trajectories=run.total_trajectories,
            trajectories=counts[run.id],
            turns=turns[run.id],
            policy_versions=tuple(sorted(versions[run.id])),
        )
        for run in runs
    }
