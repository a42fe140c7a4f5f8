"""The lifecycle of runs, their trajectories, training jobs and their groups: which events
move them, from where, to where.

Every status change of a run, a trajectory, a training job or a training group is one of
the events below. The tables are the whole state machine: an event from a status it has no
entry for is refused with `Conflict` (HTTP 409, CLI exit 2), and the store's writers are
the only code that writes a status column (`repo_runs.set_run_status`,
`repo_trajectories.mark_trajectory`, `repo_trajectories.move_trajectories`,
`repo_training.apply_job_event`, `repo_training.claim_step`); each of them asks this
module first, so no code path can move anything around the machine.
`tests/orchestrator/test_status_writes.py` fails if a status is written anywhere else.

Runs::

    pending --start--> running --finish/fail--> finished | failed
    pending|running --cancel--> cancelled          failed|interrupted --cancel--> cancelled
    pending|running --interrupt--> interrupted (Ctrl-C or SIGTERM on the process carrying it out)
    pending|running|failed|cancelled|interrupted --resume--> pending (its failed trajectories
    reopen)

Trajectories (a job moves every trajectory of its problem at once)::

    pending|failed|running --start--> running      running --finish--> finished
    running --fail--> failed                       failed|running --reopen--> pending

Training jobs::

    pending|running --begin_round--> running       pending --report_step--> running
    any but finished --stop--> stopped             any but finished --resume--> running
    any but finished --fail--> failed
    pending|running|stopped --finish--> finished (the trainer reported the budget's last step)

Training groups (the ledger's scored groups; marked once, in the claim's transaction)::

    ready --consume--> consumed                    ready --expire--> stale
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from cobalt.shared.contracts.statuses import (
    RunStatus,
    TrainingGroupStatus,
    TrainingJobStatus,
    TrajectoryStatus,
)
from cobalt.shared.errors import Conflict

__all__ = [
    "GROUP_TRANSITIONS",
    "JOB_TRANSITIONS",
    "RUN_TRANSITIONS",
    "TRAJECTORY_TRANSITIONS",
    "GroupEvent",
    "JobEvent",
    "RunEvent",
    "TrajectoryEvent",
    "group_after",
    "is_run_move",
    "is_trajectory_move",
    "job_after",
    "run_after",
    "trajectory_after",
]


class RunEvent(StrEnum):
    START = "start"
    """A worker took the run's first job."""
    FINISH = "finish"
    """No trajectory is left open and none failed."""
    FAIL = "fail"
    """No trajectory is left open and some failed."""
    CANCEL = "cancel"
    """The user cancelled: jobs not started skip it, running ones stop at their next turn."""
    RESUME = "resume"
    """The user resumed: failed trajectories reopen and the run waits for its jobs."""
    INTERRUPT = "interrupt"
    """The process carrying the run out was stopped (Ctrl-C, SIGTERM): its jobs let go of
    their trajectories (back to pending, every stored turn kept) and `cobalt run resume`
    continues it. Jobs still queued skip an interrupted run, as they skip a cancelled one."""


class TrajectoryEvent(StrEnum):
    START = "start"
    """A job took the trajectory's problem: it was pending, failed (RQ retries the job) or
    still running (the job is carried out again after its worker died)."""
    FINISH = "finish"
    """The job wrote the trajectory's last turn."""
    FAIL = "fail"
    """The job failed; the error is recorded and `cobalt run resume` reopens it."""
    REOPEN = "reopen"
    """The run was resumed (failed ones run again) or cancelled while its job ran (the
    job let go of it)."""


class JobEvent(StrEnum):
    BEGIN_ROUND = "begin_round"
    """A rollout round starts."""
    REPORT_STEP = "report_step"
    """The trainer reported its first step."""
    FINISH = "finish"
    """The trainer reported the last step of the job's budget (`max_steps`, `epochs`)."""
    STOP = "stop"
    """The user stopped the job: the trainer ends after its current step."""
    RESUME = "resume"
    """The user resumed the job (then starts its trainer with --resume)."""
    FAIL = "fail"
    """A round rolled out in the API process failed."""


class GroupEvent(StrEnum):
    CONSUME = "consume"
    """A trainer's claim took the group for a step (exactly once)."""
    EXPIRE = "expire"
    """A claim found it sampled outside the job's off-policy window (`training.staleness`)."""


_R = RunStatus
RUN_TRANSITIONS: Mapping[RunEvent, Mapping[RunStatus, RunStatus]] = {
    RunEvent.START: {_R.PENDING: _R.RUNNING},
    RunEvent.FINISH: {_R.PENDING: _R.FINISHED, _R.RUNNING: _R.FINISHED},
    RunEvent.FAIL: {_R.PENDING: _R.FAILED, _R.RUNNING: _R.FAILED},
    RunEvent.CANCEL: {s: _R.CANCELLED for s in (_R.PENDING, _R.RUNNING, _R.FAILED, _R.INTERRUPTED)},
    RunEvent.INTERRUPT: {_R.PENDING: _R.INTERRUPTED, _R.RUNNING: _R.INTERRUPTED},
    RunEvent.RESUME: {
        s: _R.PENDING for s in (_R.PENDING, _R.RUNNING, _R.FAILED, _R.CANCELLED, _R.INTERRUPTED)
    },
}
"""event -> {status it may happen in: the status it leads to}."""

_T = TrajectoryStatus
TRAJECTORY_TRANSITIONS: Mapping[TrajectoryEvent, Mapping[TrajectoryStatus, TrajectoryStatus]] = {
    TrajectoryEvent.START: {s: _T.RUNNING for s in (_T.PENDING, _T.FAILED, _T.RUNNING)},
    TrajectoryEvent.FINISH: {_T.RUNNING: _T.FINISHED},
    TrajectoryEvent.FAIL: {_T.RUNNING: _T.FAILED},
    TrajectoryEvent.REOPEN: {_T.FAILED: _T.PENDING, _T.RUNNING: _T.PENDING},
}
"""event -> {status it may happen in: the status it leads to}."""

_J = TrainingJobStatus
_UNFINISHED_JOB = (_J.PENDING, _J.RUNNING, _J.STOPPED, _J.FAILED)
JOB_TRANSITIONS: Mapping[JobEvent, Mapping[TrainingJobStatus, TrainingJobStatus]] = {
    JobEvent.BEGIN_ROUND: {_J.PENDING: _J.RUNNING, _J.RUNNING: _J.RUNNING},
    JobEvent.REPORT_STEP: {_J.PENDING: _J.RUNNING},
    # A stop that came while the last step trained does not keep a spent budget open.
    JobEvent.FINISH: {s: _J.FINISHED for s in (_J.PENDING, _J.RUNNING, _J.STOPPED)},
    JobEvent.STOP: {s: _J.STOPPED for s in _UNFINISHED_JOB},
    JobEvent.RESUME: {s: _J.RUNNING for s in _UNFINISHED_JOB},
    JobEvent.FAIL: {s: _J.FAILED for s in _UNFINISHED_JOB},
}
"""event -> {status it may happen in: the status it leads to}."""

_G = TrainingGroupStatus
GROUP_TRANSITIONS: Mapping[GroupEvent, Mapping[TrainingGroupStatus, TrainingGroupStatus]] = {
    GroupEvent.CONSUME: {_G.READY: _G.CONSUMED},
    GroupEvent.EXPIRE: {_G.READY: _G.STALE},
}
"""event -> {status it may happen in: the status it leads to}."""

_RUN_MOVES = frozenset(
    (before, after) for table in RUN_TRANSITIONS.values() for before, after in table.items()
)


def run_after(run_id: int, status: str, event: RunEvent) -> RunStatus:
    """The status run `run_id` moves to on `event`.

    Raises:
        Conflict: the event cannot happen in `status`.
    """
    after = RUN_TRANSITIONS[event].get(RunStatus(status))
    if after is None:
        if event is RunEvent.CANCEL:
            raise Conflict(f"run {run_id} is already {status}")
        raise Conflict(f"run {run_id} is {status}; it cannot {event}")
    return after


def is_run_move(before: str, after: str) -> bool:
    """Whether some event moves a run from `before` to `after`."""
    return (RunStatus(before), RunStatus(after)) in _RUN_MOVES


_TRAJECTORY_MOVES = frozenset(
    (before, after) for table in TRAJECTORY_TRANSITIONS.values() for before, after in table.items()
)


def trajectory_after(status: str, event: TrajectoryEvent) -> TrajectoryStatus:
    """The status a trajectory in `status` moves to on `event`.

    Raises:
        Conflict: the event cannot happen in `status`.
    """
    after = TRAJECTORY_TRANSITIONS[event].get(TrajectoryStatus(status))
    if after is None:
        raise Conflict(f"a {status} trajectory cannot {event}")
    return after


def is_trajectory_move(before: str, after: str) -> bool:
    """Whether some event moves a trajectory from `before` to `after`."""
    return (TrajectoryStatus(before), TrajectoryStatus(after)) in _TRAJECTORY_MOVES


def job_after(job_id: int, status: str, event: JobEvent) -> TrainingJobStatus:
    """The status training job `job_id` moves to on `event`.

    Raises:
        Conflict: the event cannot happen in `status`.
    """
    after = JOB_TRANSITIONS[event].get(TrainingJobStatus(status))
    if after is not None:
        return after
    if status == TrainingJobStatus.FINISHED:
        raise Conflict(
            f"training job {job_id} has finished: its step budget is spent, nothing is left "
            "to do; start a new job to train further"
        )
    raise Conflict(f"training job {job_id} is {status}; `cobalt train resume {job_id}` first")


def group_after(group_id: int, status: str, event: GroupEvent) -> TrainingGroupStatus:
    """The status training group `group_id` moves to on `event`.

    Raises:
        Conflict: the event cannot happen in `status` (a group is trained on at most once).
    """
    after = GROUP_TRANSITIONS[event].get(TrainingGroupStatus(status))
    if after is None:
        raise Conflict(f"training group {group_id} is {status}; it cannot {event}")
    return after
