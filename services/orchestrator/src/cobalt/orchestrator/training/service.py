"""Training jobs as the CLI and the REST API see them: create, list, show, stop, resume;
the contexts of each rollout round; and the trainer's side of the ledger (claim a step,
report a step).

A job trains on one bandit dataset. Round r (the rollouts for step r) takes the next
`contexts_per_step` contexts in the dataset's seeded order, wrapping around at the end
(an epoch), so which contexts a step sees depends only on the job and the round, and a
round scheduled twice asks for the same groups (the ledger keeps the first).

A job with `filter_zero_variance` or `schedule_contexts` (`training.selection`) takes a
round's contexts from its stream instead: the first batch, then refill batches while the
round lacks informative groups; a step of such a job may train on fewer groups once its
round has spent its refills, and fails the job when it found none.

A job with a budget (`max_steps`, `epochs`: `step_budget`) has no round past it, and the
report of its last step moves it to `finished`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.lifecycle import JOB_TRANSITIONS, JobEvent
from cobalt.orchestrator.store import repo_bandit, repo_training
from cobalt.orchestrator.store.models import (
    BanditDataset,
    TrainingJob,
    TrainingJobStatus,
)
from cobalt.orchestrator.training.browse import DEFAULT_STALE_S, last_activity, liveness_of
from cobalt.orchestrator.training.checkpoints import job_checkpoints
from cobalt.orchestrator.training.selection import RoundProgress, round_progress, round_stream
from cobalt.orchestrator.training.staleness import (
    open_rounds,
    rounds_to_begin,
    scheduling_step,
    stale_for,
)
from cobalt.shared.contracts.training import (
    StepBatch,
    StepClaim,
    StepPublic,
    StepReport,
    StepRounds,
    TrainingGroupPublic,
    TrainingJobCreate,
    TrainingJobPublic,
    TrainingJobsPublic,
    TrainingMode,
)
from cobalt.shared.contracts.training_params import (
    MODE_PARAMS,
    EpisodeParams,
    training_params,
)
from cobalt.shared.errors import Conflict, InvalidInput

__all__ = [
    "begin_round",
    "claim_step",
    "context_ids_for_round",
    "context_key",
    "create_job",
    "due_refill",
    "job_public",
    "list_jobs",
    "open_round_contexts",
    "report_step",
    "set_job_status",
    "step_budget",
    "step_rounds",
]


def create_job(
    sessions: sessionmaker[Session],
    request: TrainingJobCreate,
    *,
    check_template: Callable[[str], None] | None = None,
) -> int:
    """A pending job over the bandit dataset `request.contexts`; returns its id.

    Args:
        check_template: Refuses a feedback template name before it is loaded (the REST
            API passes `prompts.check_bundled_name`: the server's registry alone); None:
            any name `PromptTemplate.load` takes, a template file of the user's included.

    Raises:
        NotFound: no bandit dataset of that name.
        InvalidInput: bad parameters, or the mode has no contexts to train on.
        TemplateError: the template named is refused.
        Conflict: a job of that name exists.
    """
    # Imported here: the rollout rules cost the job-reading commands' start-up.
    from cobalt.orchestrator.rollouts.prompts import PromptTemplate

    named = request.params.get("template")
    if check_template is not None and isinstance(named, str):
        # Before the mode's settings are read: a path gets the registry's one answer in any
        # mode, so the reply never depends on what else the request got wrong.
        check_template(named)
    params = training_params(request.mode, request.params)
    if isinstance(params, EpisodeParams) and params.template is not None:
        PromptTemplate.load(params.template)  # a bad name fails here, not in every rollout
    with sessions.begin() as session:
        dataset = repo_bandit.get_bandit_dataset(session, name=request.contexts)
        available = repo_bandit.context_count(
            session, dataset_id=dataset.id, turn_zero_only=_turn_zero_only(request.mode)
        )
        if params.trainer.contexts_per_step > available:
            raise InvalidInput(
                f"bandit dataset {request.contexts!r} has {available} contexts for mode "
                f"{request.mode}; contexts_per_step ({params.trainer.contexts_per_step}) must not "
                "exceed that (a step takes each context at most once)"
            )
        job = repo_training.create_job(
            session,
            name=request.name,
            model=request.model,
            bandit_dataset_id=dataset.id,
            params=params,
        )
        return job.id


def _turn_zero_only(mode: str) -> bool:
    return MODE_PARAMS[TrainingMode(mode)].turn_zero_contexts_only


def step_budget(session: Session, job: TrainingJob) -> int | None:
    """The steps `job` trains before it is finished; None: until stopped."""
    params = job.params
    if params.epochs is None:  # no count needed
        return params.max_steps
    contexts = (
        repo_bandit.context_count(
            session, dataset_id=job.bandit_dataset_id, turn_zero_only=_turn_zero_only(job.mode)
        )
        if job.bandit_dataset_id
        else 0
    )
    return params.step_budget(contexts)


def context_key(context_id: int) -> str:
    """The ledger's name for a bandit context (`TrainingGroup.context_key`)."""
    return f"bandit:{context_id}"


def context_ids_for_round(session: Session, *, job_id: int, round: int) -> list[int]:
    """The contexts of rollout round `round` (from 1) to roll out now: the next slice,
    wrapping around; for a job that filters zero-variance groups, those of the round's
    current batch not yet recorded (`round_progress`).

    `create_job` keeps contexts_per_step <= the dataset's contexts, so a round holds each
    context at most once (the ledger stores one group per context and round).
    """
    job = repo_training.get_job(session, job_id=job_id)
    params = job.params
    if params.filter_zero_variance:
        return progress_of_round(session, job, round).pending
    return _round_stream(session, job, round)[: params.trainer.contexts_per_step]


def _round_stream(session: Session, job: TrainingJob, round: int) -> list[int]:
    """Every context in the order round `round` takes them (`selection.round_stream`)."""
    if round < 1:
        raise InvalidInput(f"rounds count from 1, not {round}")
    if job.bandit_dataset_id is None:
        raise InvalidInput(f"training job {job.id} has no bandit dataset")
    params = job.params
    ordered = repo_bandit.context_ids(
        session, dataset_id=job.bandit_dataset_id, turn_zero_only=_turn_zero_only(job.mode)
    )
    visits = None
    if params.schedule_contexts:
        # The visits claimed by the step before this round could start (see selection).
        known = scheduling_step(round, max_staleness=params.max_staleness)
        by_key = repo_training.claimed_visits(session, job_id=job.id, through_step=known)
        visits = {i: by_key[context_key(i)] for i in ordered if context_key(i) in by_key}
    return round_stream(
        ordered,
        job_id=job.id,
        round=round,
        per_step=params.trainer.contexts_per_step,
        selection=params,
        seed=params.seed,
        visits=visits,
    )


def progress_of_round(session: Session, job: TrainingJob, round: int) -> RoundProgress:
    """Where round `round` of `job` stands in the ledger (`selection.round_progress`)."""
    params = job.params
    stream = _round_stream(session, job, round)
    by_key = repo_training.round_groups(session, job_id=job.id, round=round)
    recorded = {i: by_key[context_key(i)] for i in stream if context_key(i) in by_key}
    return round_progress(
        stream, recorded, per_step=params.trainer.contexts_per_step, selection=params
    )


def due_refill(sessions: sessionmaker[Session], job_id: int, round: int) -> list[int]:
    """The contexts of a refill batch of `round` that is due and not begun (none of its
    groups recorded): what a rollout worker that finished the batch before queues. Empty
    for a job that does not filter, or a round with nothing due."""
    with sessions() as session:
        job = repo_training.get_job(session, job_id=job_id)
        if not job.params.filter_zero_variance:
            return []
        progress = progress_of_round(session, job, round)
    begun = progress.refills == 0 or progress.pending != progress.batch
    return [] if begun else progress.pending


def open_round_contexts(session: Session) -> list[tuple[int, int, list[int]]]:
    """(job, round, contexts) for every round a running job's trainer has begun and not
    trained on yet (`staleness.open_rounds`) whose contexts to roll out now still lack a
    recorded group: the training work a carrier should hold, ascending."""
    found = []
    for job in repo_training.list_jobs(session):
        if job.status != TrainingJobStatus.RUNNING:
            continue
        params = job.params
        rounds = open_rounds(
            steps_done=job.step,
            max_staleness=params.max_staleness,
            budget=step_budget(session, job),
            begun=job.rounds_begun,
        )
        for round in rounds:
            recorded = repo_training.round_groups(session, job_id=job.id, round=round)
            missing = [
                i
                for i in context_ids_for_round(session, job_id=job.id, round=round)
                if context_key(i) not in recorded
            ]
            if missing:
                found.append((job.id, round, missing))
    return sorted(found)


def step_rounds(sessions: sessionmaker[Session], job_id: int, step: int) -> StepRounds:
    """The rounds a trainer on `step` should have begun (`staleness.rounds_to_begin`, the
    job's window and budget): it starts those it has not, and never computes the window.

    Raises:
        NotFound: no such job.
        InvalidInput: `step` is not a step (they count from 1).
    """
    if step < 1:
        raise InvalidInput(f"steps count from 1, not {step}")
    with sessions() as session:
        job = repo_training.get_job(session, job_id=job_id)
        params = job.params
        budget = step_budget(session, job)
    rounds = rounds_to_begin(step, max_staleness=params.max_staleness, budget=budget)
    return StepRounds(step=step, rounds=list(rounds))


def begin_round(sessions: sessionmaker[Session], job_id: int, round: int) -> list[int]:
    """The contexts of a round about to be rolled out; a pending job becomes running.

    Raises:
        NotFound: no such job.
        Conflict: the job is stopped, failed or finished (resume it first), or the round is
            past its step budget.
    """
    with sessions.begin() as session:
        job = repo_training.get_job(session, job_id=job_id, for_update=True)
        repo_training.apply_job_event(job, JobEvent.BEGIN_ROUND)
        budget = step_budget(session, job)
        if budget is not None and round > budget:
            raise Conflict(
                f"round {round} is past training job {job_id}'s budget of {budget} steps"
            )
        params = job.params
        known = scheduling_step(round, max_staleness=params.max_staleness)
        if params.schedule_contexts and known >= 1:
            if not repo_training.step_was_claimed(session, job_id=job_id, step=known):
                raise Conflict(
                    f"round {round} of training job {job_id} is scheduled from the ledger of "
                    f"step {known}: claim that step first"
                )
        job.rounds_begun = max(job.rounds_begun or 0, round)
        return context_ids_for_round(session, job_id=job_id, round=round)


def set_job_status(sessions: sessionmaker[Session], job_id: int, status: TrainingJobStatus) -> None:
    """Stop a job (its trainer ends after the current step) or mark it running again.

    Raises:
        NotFound: no such job.
        InvalidInput: `status` is neither stopped nor running.
        Conflict: the job has finished. (Resuming a job whose budget is spent finishes it.)
    """
    events = {TrainingJobStatus.STOPPED: JobEvent.STOP, TrainingJobStatus.RUNNING: JobEvent.RESUME}
    if status not in events:
        raise InvalidInput(f"a training job can be stopped or resumed, not set {status}")
    with sessions.begin() as session:
        job = repo_training.get_job(session, job_id=job_id, for_update=True)
        repo_training.apply_job_event(job, events[status])
        if status == TrainingJobStatus.RUNNING:
            job.error = None
            budget = step_budget(session, job)
            if budget is not None and job.step >= budget:  # e.g. failed after its last step
                repo_training.apply_job_event(job, JobEvent.FINISH)


def claim_step(
    sessions: sessionmaker[Session], job_id: int, step: int, claim: StepClaim
) -> StepBatch:
    """The groups of `step` for the trainer (the same on every ask); not ready: ask again.

    A job filtering zero-variance groups trains on fewer once the step's round is
    complete (its refills spent); if that round found no informative group at all, the
    job fails (as DAPO's trainer stops): its data is too easy or too hard for the policy.

    Raises:
        Conflict: that failure, with its reason.
    """
    failure = None
    with sessions.begin() as session:
        job = repo_training.get_job(session, job_id=job_id, for_update=True)
        params = job.params
        enough, refills, progress = None, 0, None
        if params.filter_zero_variance:
            progress = progress_of_round(session, job, step)
            refills = progress.refills
            enough = 1 if progress.complete else None
        claimed = repo_training.claim_step(
            session,
            job_id=job_id,
            step=step,
            groups=claim.groups,
            # The job's window: the claim says where the trainer is, never how far back.
            stale=stale_for(claim.current_version, max_staleness=params.max_staleness),
            enough=enough,
        )
        if claimed is None and progress is not None and progress.complete:
            if progress.informative == 0 and job.status in JOB_TRANSITIONS[JobEvent.FAIL]:
                failure = (
                    f"step {step}: every group of round {step} had zero reward variance (or "
                    f"was dropped) after {refills} refill rounds; the contexts are too easy or "
                    "too hard for the policy: raise max_refill_rounds or turn "
                    "filter_zero_variance off, then resume the job"
                )
                repo_training.apply_job_event(job, JobEvent.FAIL)
                job.error = failure
        if claimed is None:
            batch = StepBatch(step=step, ready=False, stale=0)
        else:
            batch = _step_batch(step, claimed, refills)
    if failure is not None:
        raise Conflict(f"training job {job_id} failed: {failure}")
    return batch


def _step_batch(step: int, claimed: repo_training.ClaimedStep, refills: int) -> StepBatch:
    return StepBatch(
        step=step,
        ready=True,
        stale=claimed.stale,
        dropped=claimed.dropped,
        masked=claimed.masked,
        dropped_zero_variance=claimed.dropped_zero_variance,
        refill_rounds=refills,
        groups=[
            TrainingGroupPublic.model_validate(group, from_attributes=True)
            for group in claimed.groups
        ],
    )


def report_step(sessions: sessionmaker[Session], job_id: int, report: StepReport) -> None:
    """Record a checkpointed step and the policy version it published; the report of the
    budget's last step finishes the job.

    Reporting a step again (a trainer that died after reporting and resumed) keeps the
    first record. The job's step and version only move forward.

    Raises:
        NotFound: no such job.
        Conflict: the step was not claimed first.
    """
    with sessions.begin() as session:
        job = repo_training.get_job(session, job_id=job_id, for_update=True)
        if not repo_training.step_was_claimed(session, job_id=job_id, step=report.step):
            raise Conflict(f"step {report.step} of job {job_id} was never claimed")
        repo_training.record_step(
            session,
            job_id=job_id,
            step=report.step,
            policy_version=report.policy_version,
            metrics=report.metrics,
            checkpoint=(
                report.checkpoint.model_dump(mode="json") if report.checkpoint is not None else None
            ),
        )
        job.step = max(job.step, report.step)
        job.policy_version = max(job.policy_version, report.policy_version)
        budget = step_budget(session, job)
        if budget is not None and job.step >= budget:
            if job.status in JOB_TRANSITIONS[JobEvent.FINISH]:
                repo_training.apply_job_event(job, JobEvent.FINISH)
        elif job.status in JOB_TRANSITIONS[JobEvent.REPORT_STEP]:
            repo_training.apply_job_event(job, JobEvent.REPORT_STEP)


def _public(
    session: Session, job: TrainingJob, *, with_steps: bool, stale_after_s: float
) -> TrainingJobPublic:
    dataset = session.get(BanditDataset, job.bandit_dataset_id) if job.bandit_dataset_id else None
    steps, checkpoints = [], []
    if with_steps:
        rows = repo_training.steps_of(session, job_id=job.id)
        steps = [
            StepPublic(
                step=row.step,
                policy_version=row.policy_version,
                metrics=row.metrics,
                created_at=row.created_at,
            )
            for row in rows
        ]
        checkpoints = job_checkpoints(session, job, rows)
    return TrainingJobPublic(
        id=job.id,
        name=job.name,
        mode=job.mode,
        status=TrainingJobStatus(job.status),
        contexts=dataset.name if dataset else None,
        model=job.model,
        params=job.params,
        step=job.step,
        policy_version=job.policy_version,
        groups=repo_training.group_counts(session, job_id=job.id),
        error=job.error,
        created_at=job.created_at,
        steps=steps,
        checkpoints=checkpoints,
        step_budget=step_budget(session, job),
        last_activity_at=(active := last_activity(session, job)),
        liveness=liveness_of(job.status, active, datetime.now(UTC), stale_after_s),
    )


def job_public(
    sessions: sessionmaker[Session], job_id: int, *, stale_after_s: float = DEFAULT_STALE_S
) -> TrainingJobPublic:
    """A job with every step's metrics; stale when waiting and silent for `stale_after_s`.

    Raises:
        NotFound: no such job.
    """
    with sessions() as session:
        job = repo_training.get_job(session, job_id=job_id)
        return _public(session, job, with_steps=True, stale_after_s=stale_after_s)


def list_jobs(
    sessions: sessionmaker[Session], *, stale_after_s: float = DEFAULT_STALE_S
) -> TrainingJobsPublic:
    """Every job, newest first, without the per-step metrics."""
    with sessions() as session:
        jobs = repo_training.list_jobs(session)
        items = [
            _public(session, job, with_steps=False, stale_after_s=stale_after_s) for job in jobs
        ]
    return TrainingJobsPublic(items=items, total=len(items))
