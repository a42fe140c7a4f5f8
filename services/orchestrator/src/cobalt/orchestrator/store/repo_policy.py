"""Which weights produced what: the policy a run records (`Run.policy`) and the
checkpoint each training step published (`TrainingStep.checkpoint`)."""

from __future__ import annotations

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from cobalt.orchestrator.store.models import Run
from cobalt.shared.contracts.weights import WeightsIdentity

__all__ = ["record_run_policy", "run_policy", "runs_of_job_weights"]


def run_policy(run: Run) -> WeightsIdentity | None:
    """The policy the run recorded, or None (not reported, or a run older than 0014)."""
    return WeightsIdentity.model_validate(run.policy) if run.policy is not None else None


def record_run_policy(session: Session, *, run_id: int, policy: WeightsIdentity) -> None:
    """Record the weights that produce the run (replacing any it had)."""
    session.execute(
        update(Run)
        .where(Run.id == run_id)
        .values(policy=policy.model_dump(mode="json"), policy_job_id=policy.job)
    )


def runs_of_job_weights(session: Session, *, job_id: int) -> list[tuple[int, WeightsIdentity]]:
    """The runs evaluated with weights a training job wrote, newest first, with the policy
    each recorded (so the caller can match each to its step)."""
    rows = session.execute(
        select(Run.id, Run.policy).where(Run.policy_job_id == job_id).order_by(Run.id.desc())
    )
    return [(run_id, WeightsIdentity.model_validate(policy)) for run_id, policy in rows]
