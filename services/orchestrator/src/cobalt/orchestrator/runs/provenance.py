"""The policy a run records: which weights produced it (docs/runs.md, "Provenance").

When a run starts (and when it is resumed) its first job asks the endpoint which weights
it serves (`GET /v1/policy` on Cobalt's inference service: directory, digest, training
job and step) and the run records the answer. Policy versions alone cannot say it: they
restart at 0 with every server, so two jobs' "v4" read the same. A resumed run whose
endpoint now serves other weights is refused, as a changed prompt template is: its turns
would come from two policies under one name.
"""

from __future__ import annotations

import logging

from pydantic import SecretStr
from sqlalchemy.orm import Session

from cobalt.orchestrator.store.models import Run, RunStatus
from cobalt.orchestrator.store.repo_policy import record_run_policy, run_policy
from cobalt.shared.clients.inference import served_weights
from cobalt.shared.contracts.weights import WeightsIdentity
from cobalt.shared.errors import Conflict
from cobalt.shared.weight_identity import same_weights, weights_line

__all__ = ["ask_served_policy", "record_served_policy"]

logger = logging.getLogger(__name__)


def ask_served_policy(run: Run, api_key: SecretStr | None) -> WeightsIdentity | None:
    """What the run's endpoint serves, asked only while the run waits to start (the jobs
    of a running run need not ask again); None: not asked, or not reported."""
    if run.status != RunStatus.PENDING:
        return None
    key = api_key.get_secret_value() if api_key is not None else None
    return served_weights(run.base_url, key)


def record_served_policy(session: Session, run: Run, served: WeightsIdentity | None) -> None:
    """Record `served` on a run that starts now (under its row lock).

    Raises:
        Conflict: the run recorded other weights when it started (it is being resumed
            against another policy).
    """
    if served is None:
        return
    recorded = run_policy(run)
    if recorded is not None and not same_weights(recorded, served):
        raise Conflict(
            f"run {run.id} was started with {weights_line(recorded)}, but {run.base_url} "
            f"now serves {weights_line(served)}; serve the run's weights again (`cobalt "
            "inference serve --model DIR`) to resume it, or start a new run"
        )
    if recorded != served:
        record_run_policy(session, run_id=run.id, policy=served)
        logger.info("run %d: policy %s", run.id, weights_line(served))
