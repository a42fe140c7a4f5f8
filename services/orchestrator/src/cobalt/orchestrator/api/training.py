"""Training routes: jobs for people and the CLI, rounds and steps for the trainer."""

from __future__ import annotations

from fastapi import APIRouter, status

from cobalt.orchestrator.api.deps import CarrierDep, JobId, Sessions, Settings, StepNumber
from cobalt.orchestrator.rollouts.prompts import check_bundled_name
from cobalt.orchestrator.training import service
from cobalt.orchestrator.training.browse import step_groups
from cobalt.orchestrator.worker.carry_out import start_round
from cobalt.shared.contracts.statuses import TrainingJobStatus
from cobalt.shared.contracts.training import (
    RoundStarted,
    StepBatch,
    StepClaim,
    StepGroupsPublic,
    StepReport,
    StepRounds,
    TrainingJobCreate,
    TrainingJobPublic,
    TrainingJobsPublic,
)

router = APIRouter(prefix="/v1/training/jobs", tags=["training"])


@router.post("", status_code=status.HTTP_201_CREATED)
def create_job(body: TrainingJobCreate, sessions: Sessions) -> TrainingJobPublic:
    """A pending job; its trainer (`cobalt trainer serve --job ID`) drives it."""
    job_id = service.create_job(sessions, body, check_template=check_bundled_name)
    return service.job_public(sessions, job_id)


@router.get("")
def list_jobs(sessions: Sessions, settings: Settings) -> TrainingJobsPublic:
    return service.list_jobs(sessions, stale_after_s=settings.training_stale_s)


@router.get("/{job_id}")
def show_job(job_id: JobId, sessions: Sessions, settings: Settings) -> TrainingJobPublic:
    """A job with every step's metrics and its liveness."""
    return service.job_public(sessions, job_id, stale_after_s=settings.training_stale_s)


@router.get("/{job_id}/steps/{step}/groups")
def show_step_groups(job_id: JobId, step: StepNumber, sessions: Sessions) -> StepGroupsPublic:
    """The groups a step trained on (or dropped as stale): samples, rewards, advantages."""
    return step_groups(sessions, job_id, step)


@router.post("/{job_id}/stop")
def stop_job(job_id: JobId, sessions: Sessions) -> TrainingJobPublic:
    """The trainer stops after its current step; queued rollouts are skipped."""
    service.set_job_status(sessions, job_id, TrainingJobStatus.STOPPED)
    return service.job_public(sessions, job_id)


@router.post("/{job_id}/resume")
def resume_job(job_id: JobId, sessions: Sessions) -> TrainingJobPublic:
    """Mark a stopped or failed job running again (then start its trainer with --resume)."""
    service.set_job_status(sessions, job_id, TrainingJobStatus.RUNNING)
    return service.job_public(sessions, job_id)


@router.post("/{job_id}/rounds/{round}", status_code=status.HTTP_202_ACCEPTED)
def start_rollout_round(
    job_id: JobId,
    round: StepNumber,
    sessions: Sessions,
    carrier: CarrierDep,
) -> RoundStarted:
    """Queue the rollouts of round `round` (the groups step `round` will train on)."""
    return start_round(carrier, sessions, job_id, round)


@router.get("/{job_id}/steps/{step}/rounds")
def rounds_of_step(job_id: JobId, step: StepNumber, sessions: Sessions) -> StepRounds:
    """The rounds a trainer on `step` should have begun: the job's off-policy window."""
    return service.step_rounds(sessions, job_id, step)


@router.post("/{job_id}/steps/{step}/claim")
def claim_step(job_id: JobId, step: StepNumber, body: StepClaim, sessions: Sessions) -> StepBatch:
    """The groups of a step: the same ones on every call; `ready: false` means wait."""
    return service.claim_step(sessions, job_id, step, body)


@router.post("/{job_id}/steps")
def report_step(job_id: JobId, body: StepReport, sessions: Sessions) -> TrainingJobPublic:
    """A checkpointed step and the policy version it published."""
    service.report_step(sessions, job_id, body)
    return service.job_public(sessions, job_id)
