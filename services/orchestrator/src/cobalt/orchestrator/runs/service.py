"""The run service layer: what the CLI and the REST API both call.

Creating a run writes the run row and one pending trajectory per (problem, sample) in one
transaction, so a run is either fully described or absent; the API writes the row first
and the trajectories just after, outside the request (`add_missing_trajectories`: a
large run's 168k rows are seconds of work), and a resume completes a creation that was
interrupted, since its parameters are on the run row. Which problems still need
work is always read back from the trajectories, so queueing, resuming after a crash and
cancelling are all the same few queries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.lifecycle import RUN_TRANSITIONS, RunEvent, TrajectoryEvent, run_after
from cobalt.orchestrator.store import repo_datasets, repo_runs, repo_trajectories, repo_turns
from cobalt.orchestrator.store.models import Run, Turn
from cobalt.orchestrator.store.repo_policy import run_policy
from cobalt.orchestrator.store.repo_turns import TurnRow
from cobalt.shared.contracts.executor import Compare, reference_limits
from cobalt.shared.contracts.runs import (
    INHERITED_BY_REFINE,
    REFINE_OWN_SETTINGS,
    RefineRunRequest,
    RunParams,
    RunPublic,
    SampleRunRequest,
    TrajectoryPublic,
    TurnPublic,
)
from cobalt.shared.contracts.statuses import RunKind, RunStatus, TrajectoryStatus
from cobalt.shared.errors import Conflict, InvalidInput, NotFound
from cobalt.shared.extraction import history_text

if TYPE_CHECKING:  # the HTTP client only where a run is created (store reads start faster)
    from cobalt.shared.clients import ExecutorClientSettings

__all__ = [
    "cancel_run",
    "completion_tokens",
    "create_refine_run",
    "add_missing_trajectories",
    "create_sample_run",
    "fail_run",
    "list_runs",
    "open_problem_ids",
    "reopen_failed",
    "run_public",
]


def create_sample_run(
    sessions: sessionmaker[Session],
    request: SampleRunRequest,
    *,
    executor: ExecutorClientSettings,
    defer_trajectories: bool = False,
) -> int:
    """A pending sample run with its trajectories; returns its id.

    Args:
        executor: The executor whose maximum limits the run's must be within
            (`executor_limits.executor_maximums`, asked before the transaction).
        defer_trajectories: Write only the run row; the caller then calls
            `add_missing_trajectories` (the API, off the request).

    Raises:
        NotFound: no such dataset.
        InvalidInput: the dataset has no problems; `LimitTooHigh`: a limit is above the
            executor's maximum.
        Unavailable: the executor could not be asked for its maximums.
    """
    # Imported where a run is created: the prompt rules (the rollouts package) cost the
    # store-reading commands' start-up.
    from cobalt.orchestrator.rollouts.prompts import PromptTemplate
    from cobalt.orchestrator.runs.executor_limits import executor_maximums

    template = PromptTemplate.load(request.template)

    maximums = executor_maximums(executor)
    with sessions.begin() as session:
        dataset = repo_datasets.get_dataset(session, name=request.dataset)
        if dataset is None:
            raise NotFound(f"no dataset named {request.dataset!r}; see `cobalt data list`")
        problem_ids = repo_datasets.problem_ids(session, dataset_id=dataset.id, limit=request.limit)
        if not problem_ids:
            raise InvalidInput(f"dataset {request.dataset!r} has no problems")
        # Judged as the dataset's import chose (an LCB or HumanEval import: its official
        # scorer's preset) unless the run says otherwise; recorded, so every later step of
        # the run (feedback, evaluation) judges alike.
        compare = request.compare or Compare(dataset.provenance.get("judge") or Compare.COBALT)
        limits = request.limits or reference_limits(compare)
        if maximums is not None:
            maximums.refuse_above(
                limits,
                chosen_by="the request" if request.limits else f"the {compare.value} judge preset",
            )
        params = RunParams.model_validate(
            {
                **request.model_dump(exclude={"dataset", "base_url", "model", "template"}),
                "compare": compare,
                "limits": limits,
                "problems": len(problem_ids),
            }
        )
        run = repo_runs.create_run(
            session,
            kind=RunKind.SAMPLE,
            dataset_id=dataset.id,
            base_url=request.base_url,
            model=request.model,
            params=params,
            template_name=request.template,
            template_sha256=template.sha256,
            total_trajectories=len(problem_ids) * request.n,
        )
        if not defer_trajectories:
            _add_sample_trajectories(session, run)
        return run.id


def _add_sample_trajectories(session: Session, run: Run) -> None:
    params = run.params
    if params.problems is None:
        return  # a run from before deferred creation: created whole
    problem_ids = repo_datasets.problem_ids(
        session, dataset_id=run.dataset_id, limit=params.problems
    )
    repo_trajectories.add_sample_trajectories(
        session,
        run_id=run.id,
        dataset_id=run.dataset_id,
        last_problem_id=problem_ids[-1],
        samples=params.n,
    )


_TRAJECTORY_WRITERS: dict[RunKind, Callable[[Session, Run], None]] = {
    RunKind.SAMPLE: _add_sample_trajectories,
    RunKind.REFINE: lambda session, run: None,  # copied from its sample run at creation
}
"""How each kind of run writes the trajectories its creation may have left unwritten."""


def _add_missing_trajectories(session: Session, run: Run) -> None:
    _TRAJECTORY_WRITERS[RunKind(run.kind)](session, run)


def add_missing_trajectories(sessions: sessionmaker[Session], run_id: int) -> None:
    """Write the sample run's trajectories that do not exist yet (all of them after a
    deferred creation, none after a complete one); a refine run's exist from the start."""
    with sessions.begin() as session:
        _add_missing_trajectories(session, repo_runs.get_run(session, run_id=run_id))


def create_refine_run(
    sessions: sessionmaker[Session],
    request: RefineRunRequest,
    *,
    executor: ExecutorClientSettings,
) -> int:
    """A refine run that shares turn 0 with a finished sample run (its rows are copied).

    It takes the sample run's settings (`INHERITED_BY_REFINE`: temperature, top_p, seed,
    max_tokens, think_cap_chars; and its endpoint, model, template, limits, judge and n)
    except those `request` sets: a field is set when the client gave it
    (`model_fields_set`), even at its default, so a run sampled at temperature 0.2 is
    refined at 0.2 unless the request names another. Its programs are judged with the
    sample run's limits, so those must be within `executor`'s maximums (raises as
    `create_sample_run`).
    """
    from cobalt.orchestrator.runs.executor_limits import executor_maximums

    maximums = executor_maximums(executor)
    with sessions.begin() as session:
        parent = repo_runs.get_run(session, run_id=request.from_run)
        if parent.kind != RunKind.SAMPLE or parent.status != RunStatus.FINISHED:
            raise Conflict(
                f"run {parent.id} is a {parent.status} {parent.kind} run; refine starts from "
                "a finished sample run"
            )
        inherited = parent.params
        if maximums is not None:
            maximums.refuse_above(inherited.limits, chosen_by=f"sample run {parent.id}")
        params = RunParams.model_validate(
            {
                **inherited.model_dump(exclude=set(REFINE_OWN_SETTINGS)),
                **request.model_dump(include=set(REFINE_OWN_SETTINGS)),
                **request.model_dump(include=set(INHERITED_BY_REFINE), exclude_unset=True),
            }
        )
        run = repo_runs.create_run(
            session,
            kind=RunKind.REFINE,
            dataset_id=parent.dataset_id,
            parent_run_id=parent.id,
            base_url=request.base_url or parent.base_url,
            model=request.model or parent.model,
            params=params,
            template_name=parent.template_name,
            template_sha256=parent.template_sha256,
            total_trajectories=parent.total_trajectories,
        )
        first_turns = repo_turns.first_turns(session, run_id=parent.id)
        keys = sorted({(t.problem_id, t.sample_index) for t in first_turns})
        repo_trajectories.ensure_trajectories(session, run_id=run.id, keys=keys)
        copied = [_copy(turn, run.id, params.think_cap_chars) for turn in first_turns]
        repo_turns.insert_turns(session, rows=copied)
        return run.id


def _copy(turn: Turn, run_id: int, think_cap_chars: int) -> TurnRow:
    """A sample run's turn 0 as the refine run's, its history text cut to the refine's cap
    (the next prompts are built from the stored response, so it must be this run's)."""
    kept = [n for n in TurnRow.__dataclass_fields__ if n not in ("run_id", "stored_response")]
    return TurnRow(
        run_id=run_id,
        stored_response=history_text(turn.raw_response, think_cap_chars),
        **{name: getattr(turn, name) for name in kept},
    )


def open_problem_ids(sessions: sessionmaker[Session], run_id: int) -> list[int]:
    """Problems of the run with a trajectory still pending or running (the work left)."""
    with sessions() as session:
        repo_runs.get_run(session, run_id=run_id)
        return repo_trajectories.open_problem_ids(session, run_id=run_id)


def reopen_failed(sessions: sessionmaker[Session], run_id: int) -> int:
    """Resume: failed trajectories become pending again and the run pending. Returns how many."""
    with sessions.begin() as session:
        run = repo_runs.get_run(session, run_id=run_id, lock=True)
        if run.status == RunStatus.FINISHED:
            return 0  # nothing to resume
        status = run_after(run_id, run.status, RunEvent.RESUME)
        _add_missing_trajectories(session, run)  # a creation cut short completes here
        reopened = repo_trajectories.move_trajectories(
            session, run_id=run_id, event=TrajectoryEvent.REOPEN
        )
        repo_runs.set_run_status(session, run_id=run_id, status=status)
        return reopened


def fail_run(sessions: sessionmaker[Session], run_id: int, error: str) -> None:
    """Mark a run failed with `error` (unless it already ended)."""
    with sessions.begin() as session:
        run = repo_runs.get_run(session, run_id=run_id, lock=True)
        if run.status in (RunStatus.PENDING, RunStatus.RUNNING):
            status = run_after(run_id, run.status, RunEvent.FAIL)
            repo_runs.set_run_status(session, run_id=run_id, status=status, error=error[:2000])


def cancel_run(sessions: sessionmaker[Session], run_id: int) -> None:
    """Stop a run: jobs not started skip it; running jobs stop at their next turn."""
    with sessions.begin() as session:
        run = repo_runs.get_run(session, run_id=run_id, lock=True)
        status = run_after(run_id, run.status, RunEvent.CANCEL)
        repo_runs.set_run_status(session, run_id=run_id, status=status)


def interrupt_run(sessions: sessionmaker[Session], run_id: int) -> bool:
    """Record that the process carrying the run out stopped: a pending or running run
    becomes `interrupted` (its jobs have let go of their trajectories, or will at their
    next turn); a run that ended meanwhile keeps its status. Returns whether it moved."""
    with sessions.begin() as session:
        run = repo_runs.get_run(session, run_id=run_id, lock=True)
        if run.status not in RUN_TRANSITIONS[RunEvent.INTERRUPT]:
            return False
        status = run_after(run_id, run.status, RunEvent.INTERRUPT)
        repo_runs.set_run_status(
            session,
            run_id=run_id,
            status=status,
            error=f"interrupted; `cobalt run resume {run_id}` continues it",
        )
        return True


def completion_tokens(session: Session, run_id: int) -> int:
    """Tokens generated so far in a run (for the tokens/s of the progress display)."""
    return repo_turns.completion_tokens(session, run_id=run_id)


def run_public(
    sessions: sessionmaker[Session], run_id: int, *, with_turns: bool = False
) -> RunPublic:
    """One run as the CLI and the API show it; `with_turns` adds every trajectory."""
    with sessions() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        public = _publics(session, [run])[0]
        if with_turns:
            public.trajectories = _trajectories(session, run)
        return public


def list_runs(sessions: sessionmaker[Session], *, limit: int = 50) -> list[RunPublic]:
    """The `limit` most recent runs, newest first, in four queries however many there are."""
    with sessions() as session:
        return _publics(session, repo_runs.list_runs(session, limit=limit))


def _publics(session: Session, runs: Sequence[Run]) -> list[RunPublic]:
    progress = repo_runs.runs_progress(session, runs=runs)
    names = repo_datasets.dataset_names(session, ids={run.dataset_id for run in runs})
    return [
        RunPublic(
            id=run.id,
            kind=RunKind(run.kind),
            status=RunStatus(run.status),
            dataset=names.get(run.dataset_id, ""),
            parent_run_id=run.parent_run_id,
            base_url=run.base_url,
            model=run.model,
            params=run.params,
            template_name=run.template_name,
            template_sha256=run.template_sha256,
            total_trajectories=run.total_trajectories,
            trajectories_by_status=dict(progress[run.id].trajectories),
            turns_written=progress[run.id].turns,
            policy_versions=list(progress[run.id].policy_versions),
            policy=run_policy(run),
            created_at=run.created_at,
            started_at=run.started_at,
            finished_at=run.finished_at,
            error=run.error,
            name=run.name,
            tags=list(run.tags or []),
            notes=run.notes,
        )
        for run in runs
    ]


def _trajectories(session: Session, run: Run) -> list[TrajectoryPublic]:
    from cobalt.orchestrator.rollouts.conversation import messages_of_turns

    names = repo_datasets.external_ids(session, dataset_id=run.dataset_id)
    rows: dict[tuple[int, int], list[Turn]] = {}
    for turn in repo_turns.turns_of_run(session, run_id=run.id):
        rows.setdefault((turn.problem_id, turn.sample_index), []).append(turn)
    turns = {
        key: [
            TurnPublic.model_validate(turn, from_attributes=True).model_copy(
                update={"messages": messages}
            )
            for turn, messages in zip(trajectory, messages_of_turns(trajectory), strict=True)
        ]
        for key, trajectory in rows.items()
    }
    trajectories = repo_trajectories.trajectories_of(session, run_id=run.id)
    return [
        TrajectoryPublic(
            problem=names.get(t.problem_id, str(t.problem_id)),
            sample_index=t.sample_index,
            status=TrajectoryStatus(t.status),
            error=t.error,
            turns=turns.get((t.problem_id, t.sample_index), []),
        )
        for t in trajectories
    ]
