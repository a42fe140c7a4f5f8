"""A training job's checkpoints as its page lists them: each reported step's published
weights, whether they are still on disk, the `cobalt inference serve` line that serves
them, and the runs evaluated with them (runs record their policy: `runs.provenance`)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy.orm import Session

from cobalt.orchestrator.store.models import TrainingJob, TrainingStep
from cobalt.orchestrator.store.repo_policy import runs_of_job_weights
from cobalt.shared.contracts.training import JobCheckpoint
from cobalt.shared.contracts.weights import WeightsIdentity
from cobalt.shared.weight_identity import same_weights

__all__ = ["job_checkpoints", "serve_command"]


def serve_command(weights: WeightsIdentity, served_name: str) -> str | None:
    """The command line that starts a server on `weights`; None for weights no server
    starts from alone (a delta needs its chain, an adapter its base model)."""
    if weights.kind != "full" or weights.path is None:
        return None
    return shlex.join(
        ["cobalt", "inference", "serve", "--model", weights.path, "--served-name", served_name]
    )


def job_checkpoints(
    session: Session, job: TrainingJob, steps: Sequence[TrainingStep]
) -> list[JobCheckpoint]:
    """Every reported step's checkpoint, newest first, with the runs whose recorded policy
    is that step's weights (by job and step; by digest when the step reported one)."""
    evaluated = runs_of_job_weights(session, job_id=job.id)
    listed: list[JobCheckpoint] = []
    for row in sorted(steps, key=lambda s: s.step, reverse=True):
        weights = WeightsIdentity.model_validate(row.checkpoint) if row.checkpoint else None
        runs = [
            run_id
            for run_id, policy in evaluated
            if policy.step == row.step and (weights is None or same_weights(weights, policy))
        ]
        listed.append(
            JobCheckpoint(
                step=row.step,
                policy_version=row.policy_version,
                weights=weights,
                present=weights is not None
                and weights.path is not None
                and Path(weights.path).is_dir(),
                serve_command=(
                    serve_command(weights, f"{job.name}-step-{row.step}") if weights else None
                ),
                runs=runs,
            )
        )
    return listed
