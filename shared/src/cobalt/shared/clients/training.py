"""The trainer's client of the orchestrator's training API (`/v1/training/jobs/...`).

The trainer process never opens the database: it reads its job, asks which rollout
rounds to begin (the off-policy window is the orchestrator's) and starts them, claims each
step's scored groups and reports finished steps over this client. Every call is safe to
repeat (a round or a claim asked for twice gives the same groups, a step reported twice
is recorded once), so all of them retry as `cobalt.shared.clients.base` describes, then
raise `Unavailable` or the error the orchestrator answered.
"""

from __future__ import annotations

from cobalt.shared.clients.base import ServiceClient
from cobalt.shared.contracts.training import (
    RoundStarted,
    StepBatch,
    StepClaim,
    StepReport,
    StepRounds,
    TrainingJobPublic,
)

__all__ = ["TrainingClient"]


class TrainingClient(ServiceClient):
    """Blocking client of one orchestrator (`base_url` without /v1, e.g. http://host:8200)."""

    service = "orchestrator"
    start_hint = "is `cobalt orchestrator serve` running?"
    default_timeout_s = 120.0

    def job(self, job_id: int) -> TrainingJobPublic:
        """The job with its settings and every reported step."""
        return self._parse(self._send("GET", f"/v1/training/jobs/{job_id}"), TrainingJobPublic)

    def step_rounds(self, job_id: int, step: int) -> StepRounds:
        """The rounds to have begun for `step`: the job's off-policy window, the
        orchestrator's rule (the trainer starts those it has not yet)."""
        path = f"/v1/training/jobs/{job_id}/steps/{step}/rounds"
        return self._parse(self._send("GET", path), StepRounds)

    def start_round(self, job_id: int, round: int) -> RoundStarted:
        """Have the rollout workers produce round `round`'s groups."""
        path = f"/v1/training/jobs/{job_id}/rounds/{round}"
        return self._parse(self._send("POST", path), RoundStarted)

    def claim_step(self, job_id: int, step: int, claim: StepClaim) -> StepBatch:
        """The groups of `step` (the same on every call), or `ready=False`."""
        path = f"/v1/training/jobs/{job_id}/steps/{step}/claim"
        return self._parse(self._send("POST", path, claim), StepBatch)

    def report_step(self, job_id: int, report: StepReport) -> TrainingJobPublic:
        """Record a checkpointed, published step."""
        path = f"/v1/training/jobs/{job_id}/steps"
        return self._parse(self._send("POST", path, report), TrainingJobPublic)
