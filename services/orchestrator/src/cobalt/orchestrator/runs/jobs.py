"""The unit of a run's work: one problem of one run, `roll_out_run_problem`.

The job reads everything it needs from the database (the run's parameters, the problem,
the turns already written), so any worker that reaches PostgreSQL, the model endpoint and
the executor can take it, and a retried job resumes instead of starting over. The API key
of the model endpoint travels with the job, never into the database.

It takes what it uses as arguments (the database, the rollout runtime, the executor, the
key): whether it came off the queue or runs in this process is `worker`'s business.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.lifecycle import RUN_TRANSITIONS, RunEvent, TrajectoryEvent, run_after
from cobalt.orchestrator.rollouts.loop import RolloutSpec, RunCancelled, roll_out_problem
from cobalt.orchestrator.rollouts.prompts import PromptTemplate
from cobalt.orchestrator.rollouts.runtime import JobInterrupted, RolloutRuntime
from cobalt.orchestrator.rollouts.sampling import SamplingParams
from cobalt.orchestrator.runs.failures import failed_trajectory_error, run_failure
from cobalt.orchestrator.runs.provenance import ask_served_policy, record_served_policy
from cobalt.orchestrator.store import repo_runs, repo_trajectories, repo_turns
from cobalt.orchestrator.store.models import Problem, RunStatus, TrajectoryStatus
from cobalt.orchestrator.store.repo_turns import TurnRow
from cobalt.shared.clients import ExecutorAddress, ModelEndpoint
from cobalt.shared.contracts import ProblemRow
from cobalt.shared.contracts.runs import RunParams
from cobalt.shared.errors import CobaltError, Conflict, NotFound

__all__ = [
    "DatabaseTurnStore",
    "finish_run_if_done",
    "reopen_problem",
    "roll_out_run_problem",
    "spec_of_run",
]

logger = logging.getLogger(__name__)


class DatabaseTurnStore:
    """`TurnStore` over the orchestrator's database, one short transaction per call.

    `save` reads the run's status in the transaction that writes the turns, so the loop's
    cancellation check before each turn costs no extra round trip.
    """

    def __init__(self, sessions: sessionmaker[Session], run_id: int) -> None:
        self.sessions = sessions
        self.run_id = run_id
        self._status = RunStatus.RUNNING.value
        self._trajectory_ids: dict[tuple[int, int, int], int] = {}

    def stored_turns(self, problem_id: int) -> dict[int, list[TurnRow]]:
        with self.sessions() as session:
            # Read once here, so that saving a turn needs no lookup round trip.
            self._trajectory_ids.update(
                repo_trajectories.trajectory_ids_of_problem(
                    session, run_id=self.run_id, problem_id=problem_id
                )
            )
            return repo_turns.turn_rows_of_problem(
                session, run_id=self.run_id, problem_id=problem_id
            )

    def save(self, rows: Sequence[TurnRow]) -> None:
        with self.sessions.begin() as session:
            repo_turns.insert_turns(session, rows=rows, trajectory_ids=self._trajectory_ids)
            self._status = repo_runs.run_status(session, run_id=self.run_id)

    def cancelled(self) -> bool:
        """The run was cancelled or interrupted: its jobs stop before their next turn."""
        return self._status in (RunStatus.CANCELLED.value, RunStatus.INTERRUPTED.value)


def spec_of_run(run_id: int, params: RunParams) -> RolloutSpec:
    """The rollout settings a run recorded when it was created (`Run.params`)."""
    return RolloutSpec(
        run_id=run_id,
        n=params.n,
        feedback_turns=params.feedback_turns,
        sampling=SamplingParams.of(params, max_tokens=params.max_tokens),
        stop_on_pass=params.stop_on_pass,
        think_cap_chars=params.think_cap_chars,
        limits=params.limits,
        compare=params.compare,
    )


def roll_out_run_problem(
    run_id: int,
    problem_id: int,
    *,
    sessions: sessionmaker[Session],
    runtime: RolloutRuntime,
    executor: ExecutorAddress,
    api_key: SecretStr | None,
) -> dict[str, int]:
    """Advance every trajectory of one problem of one run to its last turn.

    Trajectories end `finished`, or `failed` with the reason (the error is re-raised, so
    the queue records it and retries while retries are left). A cancelled or interrupted
    run is left alone. If this process is stopping (`JobInterrupted`), the problem's
    trajectories go back to pending with every stored turn kept, and the error is
    re-raised. Returns {"turns": turns now stored for the problem}.
    """
    with sessions() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        if run.status in (RunStatus.CANCELLED, RunStatus.FINISHED, RunStatus.INTERRUPTED):
            logger.info("run %d is %s; job for problem %d skipped", run_id, run.status, problem_id)
            return {"turns": 0}
        problem_row = session.get(Problem, problem_id)
        if problem_row is None:
            raise NotFound(f"problem {problem_id} of run {run_id} no longer exists")
        problem = ProblemRow.model_validate(problem_row, from_attributes=True)
        spec = spec_of_run(run_id, run.params)
        endpoint = ModelEndpoint(
            base_url=run.base_url,
            model=run.model,
            api_key=api_key,
            vllm_extensions=runtime.vllm_extensions(
                run.base_url, api_key.get_secret_value() if api_key else None
            ),
        )
        template = PromptTemplate.load(run.template_name)
        if template.sha256 != run.template_sha256:
            raise Conflict(
                f"prompt template {run.template_name!r} changed since run {run_id} started "
                f"(sha256 {template.sha256[:12]} != {run.template_sha256[:12]}); restore it "
                "or start a new run"
            )
        served = ask_served_policy(run, api_key)  # before the lock: an HTTP call
        run = repo_runs.get_run(session, run_id=run_id, lock=True)  # its jobs start together
        if run.status in RUN_TRANSITIONS[RunEvent.START]:
            record_served_policy(session, run, served)
            status = run_after(run_id, run.status, RunEvent.START)
            repo_runs.set_run_status(session, run_id=run_id, status=status)
        repo_trajectories.move_trajectories(
            session, run_id=run_id, problem_id=problem_id, event=TrajectoryEvent.START
        )
        session.commit()
    store = DatabaseTurnStore(sessions, run_id)
    try:
        histories = runtime.run(
            lambda: _roll_out(
                runtime, spec, problem_id, problem, template, endpoint, store, executor
            )
        )
    except RunCancelled:
        logger.info("run %d cancelled; problem %d stopped", run_id, problem_id)
        _move_problem(sessions, run_id, problem_id, TrajectoryEvent.REOPEN)
        return {"turns": 0}
    except JobInterrupted:
        _move_problem(sessions, run_id, problem_id, TrajectoryEvent.REOPEN)
        raise
    except CobaltError as exc:
        error = failed_trajectory_error(exc)
        _move_problem(sessions, run_id, problem_id, TrajectoryEvent.FAIL, error=error)
        raise
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        _move_problem(sessions, run_id, problem_id, TrajectoryEvent.FAIL, error=error)
        raise
    _move_problem(sessions, run_id, problem_id, TrajectoryEvent.FINISH)
    finish_run_if_done(sessions, run_id)
    return {"turns": sum(len(h) for h in histories.values())}


async def _roll_out(
    runtime: RolloutRuntime,
    spec: RolloutSpec,
    problem_id: int,
    problem: ProblemRow,
    template: PromptTemplate,
    endpoint: ModelEndpoint,
    store: DatabaseTurnStore,
    executor: ExecutorAddress,
) -> dict[int, list[TurnRow]]:
    """The loop on the runtime's open clients (they stay open for the next job)."""
    sampler = await runtime.sampler(endpoint)
    client = await runtime.executor_client(executor)
    return await roll_out_problem(spec, problem_id, problem, template, sampler, client, store)


def _move_problem(
    sessions: sessionmaker[Session],
    run_id: int,
    problem_id: int,
    event: TrajectoryEvent,
    *,
    error: str | None = None,
) -> None:
    with sessions.begin() as session:
        repo_trajectories.move_trajectories(
            session, run_id=run_id, problem_id=problem_id, event=event, error=error
        )


def reopen_problem(sessions: sessionmaker[Session], run_id: int, problem_id: int) -> None:
    """The problem's failed (or running) trajectories back to pending: its job failed but
    will be tried again, so the run must not count them as ended (it would be marked
    failed, and stay so after the retry finished them)."""
    _move_problem(sessions, run_id, problem_id, TrajectoryEvent.REOPEN)


def finish_run_if_done(sessions: sessionmaker[Session], run_id: int) -> str | None:
    """Mark the run finished (or failed) once no trajectory is pending or running."""
    with sessions.begin() as session:
        repo_runs.get_run(session, run_id=run_id, lock=True)  # its last jobs end together
        progress = repo_runs.run_progress(session, run_id=run_id)
        open_count = sum(
            progress.trajectories.get(s, 0)
            for s in (TrajectoryStatus.PENDING, TrajectoryStatus.RUNNING)
        )
        if open_count or progress.status not in RUN_TRANSITIONS[RunEvent.FINISH]:
            return None
        failed = progress.trajectories.get(TrajectoryStatus.FAILED, 0)
        event = RunEvent.FAIL if failed else RunEvent.FINISH
        status = run_after(run_id, progress.status, event)
        errors = [
            t.error
            for t in repo_trajectories.trajectories_of(session, run_id=run_id)
            if t.status == TrajectoryStatus.FAILED
        ]
        repo_runs.set_run_status(
            session,
            run_id=run_id,
            status=status,
            error=run_failure(run_id, errors) if failed else None,
        )
        return status
