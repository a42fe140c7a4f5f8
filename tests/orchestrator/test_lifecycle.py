"""The run and training-job state machine: every (event, status) pair, and the store and
services refusing what it refuses; and runs listed without a query per run."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from sqlalchemy import Engine, event
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator import lifecycle
from cobalt.orchestrator.lifecycle import GroupEvent, JobEvent, RunEvent, TrajectoryEvent
from cobalt.orchestrator.runs import service
from cobalt.orchestrator.store import repo_datasets, repo_runs
from cobalt.orchestrator.store.models import Run
from cobalt.shared.contracts.runs import RunParams, RunPublic
from cobalt.shared.contracts.statuses import (
    RunStatus,
    TrainingGroupStatus,
    TrainingJobStatus,
    TrajectoryStatus,
)
from cobalt.shared.errors import Conflict

R, J, T = RunStatus, TrainingJobStatus, TrajectoryStatus

LEGAL_RUN = {
    (RunEvent.START, R.PENDING): R.RUNNING,
    (RunEvent.FINISH, R.PENDING): R.FINISHED,
    (RunEvent.FINISH, R.RUNNING): R.FINISHED,
    (RunEvent.FAIL, R.PENDING): R.FAILED,
    (RunEvent.FAIL, R.RUNNING): R.FAILED,
    (RunEvent.CANCEL, R.PENDING): R.CANCELLED,
    (RunEvent.CANCEL, R.RUNNING): R.CANCELLED,
    (RunEvent.CANCEL, R.FAILED): R.CANCELLED,
    (RunEvent.CANCEL, R.INTERRUPTED): R.CANCELLED,
    (RunEvent.INTERRUPT, R.PENDING): R.INTERRUPTED,
    (RunEvent.INTERRUPT, R.RUNNING): R.INTERRUPTED,
    (RunEvent.RESUME, R.PENDING): R.PENDING,
    (RunEvent.RESUME, R.RUNNING): R.PENDING,
    (RunEvent.RESUME, R.FAILED): R.PENDING,
    (RunEvent.RESUME, R.CANCELLED): R.PENDING,
    (RunEvent.RESUME, R.INTERRUPTED): R.PENDING,
}
"""Written out by hand (not read from the module), so a changed table fails here."""

UNFINISHED = (J.PENDING, J.RUNNING, J.STOPPED, J.FAILED)
LEGAL_JOB = {
    (JobEvent.BEGIN_ROUND, J.PENDING): J.RUNNING,
    (JobEvent.BEGIN_ROUND, J.RUNNING): J.RUNNING,
    (JobEvent.REPORT_STEP, J.PENDING): J.RUNNING,
    **{(JobEvent.STOP, s): J.STOPPED for s in UNFINISHED},
    **{(JobEvent.RESUME, s): J.RUNNING for s in UNFINISHED},
    **{(JobEvent.FAIL, s): J.FAILED for s in UNFINISHED},
    **{(JobEvent.FINISH, s): J.FINISHED for s in (J.PENDING, J.RUNNING, J.STOPPED)},
}

LEGAL_TRAJECTORY = {
    (TrajectoryEvent.START, T.PENDING): T.RUNNING,
    (TrajectoryEvent.START, T.FAILED): T.RUNNING,
    (TrajectoryEvent.START, T.RUNNING): T.RUNNING,
    (TrajectoryEvent.FINISH, T.RUNNING): T.FINISHED,
    (TrajectoryEvent.FAIL, T.RUNNING): T.FAILED,
    (TrajectoryEvent.REOPEN, T.FAILED): T.PENDING,
    (TrajectoryEvent.REOPEN, T.RUNNING): T.PENDING,
}


@pytest.mark.parametrize(("event", "status"), list(itertools.product(RunEvent, RunStatus)))
def test_every_run_event_in_every_status(event: RunEvent, status: RunStatus) -> None:
    expected = LEGAL_RUN.get((event, status))
    if expected is None:
        with pytest.raises(Conflict, match=f"run 7 is (already )?{status}"):
            lifecycle.run_after(7, status, event)
    else:
        assert lifecycle.run_after(7, status.value, event) is expected


@pytest.mark.parametrize(("event", "status"), list(itertools.product(JobEvent, TrainingJobStatus)))
def test_every_job_event_in_every_status(event: JobEvent, status: TrainingJobStatus) -> None:
    expected = LEGAL_JOB.get((event, status))
    if expected is None:
        with pytest.raises(Conflict, match="training job 3"):
            lifecycle.job_after(3, status, event)
    else:
        assert lifecycle.job_after(3, status.value, event) is expected


LEGAL_GROUP = {
    (GroupEvent.CONSUME, TrainingGroupStatus.READY): TrainingGroupStatus.CONSUMED,
    (GroupEvent.EXPIRE, TrainingGroupStatus.READY): TrainingGroupStatus.STALE,
}
"""A group is trained on at most once: nothing moves a consumed or stale group."""


@pytest.mark.parametrize(
    ("event", "status"), list(itertools.product(GroupEvent, TrainingGroupStatus))
)
def test_every_group_event_in_every_status(event: GroupEvent, status: TrainingGroupStatus) -> None:
    expected = LEGAL_GROUP.get((event, status))
    if expected is None:
        with pytest.raises(Conflict, match=f"training group 5 is {status}; it cannot {event}"):
            lifecycle.group_after(5, status, event)
    else:
        assert lifecycle.group_after(5, status.value, event) is expected


@pytest.mark.parametrize(
    ("event", "status"), list(itertools.product(TrajectoryEvent, TrajectoryStatus))
)
def test_every_trajectory_event_in_every_status(
    event: TrajectoryEvent, status: TrajectoryStatus
) -> None:
    expected = LEGAL_TRAJECTORY.get((event, status))
    if expected is None:
        with pytest.raises(Conflict, match=f"a {status} trajectory cannot {event}"):
            lifecycle.trajectory_after(status, event)
    else:
        assert lifecycle.trajectory_after(status.value, event) is expected
        assert lifecycle.is_trajectory_move(status, expected)


def test_a_finished_trajectory_never_moves() -> None:
    assert not any(lifecycle.is_trajectory_move(T.FINISHED, after) for after in TrajectoryStatus)


def test_a_finished_run_never_moves() -> None:
    assert not any(lifecycle.is_run_move(R.FINISHED, after) for after in RunStatus)


def _pending_run(session: Session) -> Run:
    dataset = repo_datasets.create_dataset(session, name="empty", source="jsonl")
    return repo_runs.create_run(
        session, kind="sample", dataset_id=dataset.id, base_url="http://x/v1", model="m",
        params=RunParams(n=1), template_name="default", template_sha256="ab" * 32,
        total_trajectories=0,
    )  # fmt: skip


@pytest.mark.parametrize(("before", "after"), list(itertools.product(RunStatus, RunStatus)))
def test_the_store_writes_only_moves_an_event_makes(
    sessions: sessionmaker[Session], before: RunStatus, after: RunStatus
) -> None:
    """Put a run in `before` along legal moves, then try `after` directly in the store."""
    path_to = {
        R.PENDING: [],
        R.RUNNING: [R.RUNNING],
        R.FINISHED: [R.RUNNING, R.FINISHED],
        R.FAILED: [R.RUNNING, R.FAILED],
        R.CANCELLED: [R.CANCELLED],
        R.INTERRUPTED: [R.RUNNING, R.INTERRUPTED],
    }
    with sessions.begin() as session:
        run = _pending_run(session)
        for status in path_to[before]:
            repo_runs.set_run_status(session, run_id=run.id, status=status)
        run_id = run.id
    legal = (before, after) in {(b, a) for (_, b), a in LEGAL_RUN.items()}
    with sessions.begin() as session:
        if legal:
            assert repo_runs.set_run_status(session, run_id=run_id, status=after).status == after
        else:
            with pytest.raises(Conflict, match=f"cannot go from {before} to {after}"):
                repo_runs.set_run_status(session, run_id=run_id, status=after)
    with sessions() as session:
        assert repo_runs.get_run(session, run_id=run_id).status == (after if legal else before)


def test_cancel_and_resume_go_through_the_machine(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        run = _pending_run(session)
        run_id = run.id
    service.cancel_run(sessions, run_id)
    with pytest.raises(Conflict, match=f"run {run_id} is already cancelled"):
        service.cancel_run(sessions, run_id)
    service.reopen_failed(sessions, run_id)
    with sessions() as session:
        assert repo_runs.get_run(session, run_id=run_id).status == R.PENDING


def test_listing_runs_takes_the_same_queries_for_one_run_or_many(
    sessions: sessionmaker[Session], engine: Engine
) -> None:
    """No query per run (N+1): the list's statements do not grow with its length."""
    with sessions.begin() as session:
        first = _pending_run(session).id

    def statements_of_listing() -> tuple[int, list[RunPublic]]:
        seen: list[str] = []

        def count(*args: Any) -> None:
            seen.append(args[2])

        event.listen(engine, "before_cursor_execute", count)
        try:
            runs = service.list_runs(sessions, limit=50)
        finally:
            event.remove(engine, "before_cursor_execute", count)
        return len(seen), runs

    one, runs = statements_of_listing()
    assert [r.id for r in runs] == [first]
    with sessions.begin() as session:
        dataset_id = repo_runs.get_run(session, run_id=first).dataset_id
        for _ in range(5):
            repo_runs.create_run(
                session, kind="sample", dataset_id=dataset_id, base_url="http://x/v1",
                model="m", params=RunParams(n=1), template_name="default",
                template_sha256="ab" * 32, total_trajectories=0,
            )  # fmt: skip
    many, runs = statements_of_listing()
    assert len(runs) == 6 and runs[-1].id == first  # newest first
    assert many == one
    assert all(r.status == "pending" and r.trajectories_by_status["pending"] == 0 for r in runs)
