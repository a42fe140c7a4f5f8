"""What one job uses, resolved once by its entry point (`JobResources`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.rollouts.runtime import RolloutRuntime
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.runtime import runtime, sessions_for
from cobalt.shared.clients import ExecutorAddress

if TYPE_CHECKING:
    from cobalt.orchestrator.worker.carrier_base import Carrier

__all__ = ["JobResources"]


@dataclass(frozen=True, slots=True)
class JobResources:
    """What one job uses, resolved once by its entry point."""

    settings: OrchestratorSettings
    sessions: sessionmaker[Session]
    runtime: RolloutRuntime
    executor: ExecutorAddress
    api_key: SecretStr | None
    carrier: Carrier | None = None
    """The carrier that carries the work this job makes due (a round's refill); None:
    the one the settings choose (`worker.carrier.carrier_for`)."""

    @classmethod
    def here(
        cls,
        settings: OrchestratorSettings,
        executor: ExecutorAddress,
        api_key: str | None,
        carrier: Carrier | None = None,
    ) -> JobResources:
        """For jobs of this process, on `executor` and the settings' database."""
        return cls(
            settings=settings,
            sessions=sessions_for(settings.database_url),
            runtime=runtime(),
            executor=executor,
            api_key=SecretStr(api_key) if api_key else None,
            carrier=carrier,
        )
