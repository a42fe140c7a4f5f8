"""The trainer's client of the orchestrator's training API (`/v1/training/jobs/...`).

The trainer process never opens the database: it reads its job, starts rollout rounds,
claims each step's scored groups and reports finished steps over this client. Blocking
httpx; connection failures are retried a few times with backoff (every call is safe to
repeat: a round or a claim asked for twice gives the same groups, a step reported twice
is recorded once), then raise `Unavailable`.
"""

from __future__ import annotations

import time

import httpx
from pydantic import BaseModel

from cobalt.shared.clients._service import ServiceClient
from cobalt.shared.clients.responses import parse_contract, raise_for_error
from cobalt.shared.contracts.training import (
    RoundStarted,
    StepBatch,
    StepClaim,
    StepReport,
    TrainingJobPublic,
)
from cobalt.shared.errors import Unavailable

__all__ = ["TrainingClient"]

DEFAULT_ATTEMPTS = 5
"""Tries per call when the orchestrator cannot be reached (backoff 0.5 s, doubling)."""


class TrainingClient(ServiceClient):
    """Blocking client of one orchestrator (`base_url` without /v1, e.g. http://host:8200)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 120.0,
        attempts: int = DEFAULT_ATTEMPTS,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, timeout_s=timeout_s, transport=transport)
        self._attempts = max(1, attempts)

    def _call(self, method: str, path: str, body: BaseModel | None = None) -> httpx.Response:
        delay = 0.5
        for attempt in range(self._attempts):
            try:
                response = self._client.request(
                    method,
                    path,
                    content=body.model_dump_json() if body is not None else None,
                    headers={"content-type": "application/json"} if body is not None else None,
                )
                break
            except httpx.TransportError as exc:
                if attempt + 1 == self._attempts:
                    raise Unavailable(
                        f"cannot reach the orchestrator at {self._client.base_url} "
                        f"({type(exc).__name__}: {exc or 'no detail'}); is "
                        "`cobalt orchestrator serve` running?"
                    ) from exc
                time.sleep(delay)
                delay *= 2
        raise_for_error(response, not_found_hint="is this a Cobalt orchestrator?")
        return response

    def job(self, job_id: int) -> TrainingJobPublic:
        """The job with its settings and every reported step."""
        return parse_contract(self._call("GET", f"/v1/training/jobs/{job_id}"), TrainingJobPublic)

    def start_round(self, job_id: int, round: int) -> RoundStarted:
        """Have the rollout workers produce round `round`'s groups."""
        path = f"/v1/training/jobs/{job_id}/rounds/{round}"
        return parse_contract(self._call("POST", path), RoundStarted)

    def claim_step(self, job_id: int, step: int, claim: StepClaim) -> StepBatch:
        """The groups of `step` (the same on every call), or `ready=False`."""
        path = f"/v1/training/jobs/{job_id}/steps/{step}/claim"
        return parse_contract(self._call("POST", path, claim), StepBatch)

    def report_step(self, job_id: int, report: StepReport) -> TrainingJobPublic:
        """Record a checkpointed, published step."""
        path = f"/v1/training/jobs/{job_id}/steps"
        return parse_contract(self._call("POST", path, report), TrainingJobPublic)
