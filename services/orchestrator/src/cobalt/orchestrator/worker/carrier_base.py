"""What every carrier is (`Carrier`): the queue's (`worker.queue`) and this process's
threads' (`worker.in_process`); `worker.carrier` chooses one."""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar, cast

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.work import Work

__all__ = ["Calls", "Carrier", "Failures", "OnDone"]

_Key = TypeVar("_Key", bound=Hashable)

Calls = Mapping[Hashable, Work]
"""Work to carry, by a key of the caller's (a problem id, a context id)."""
Failures = list[tuple[Hashable, BaseException]]
"""The (key, error) of each call carried out here that failed."""
OnDone = Callable[[Hashable, BaseException | None], None] | None
"""Called after each call carried out here, with its key and its error if it failed."""


class Carrier(ABC):
    """Carries work out: on the queue (`queued`: it outlives this process) or here."""

    queued: bool
    """Whether `carry` only hands the work on (to workers, which outlive this process)."""

    def __init__(self, settings: OrchestratorSettings) -> None:
        self.settings = settings
        """The settings of the entry point that chose it."""

    def carry(
        self,
        work: Mapping[_Key, Work],
        *,
        api_key: str | None,
        on_job_done: Callable[[_Key, BaseException | None], None] | None = None,
    ) -> list[tuple[_Key, BaseException]]:
        """Carry out every call of `work`; returns the (key, error) failures of the calls
        carried out here once each has had its try (none when queued).

        Args:
            api_key: The model endpoint's key, which travels with the work (never stored).
            on_job_done: Called after each call carried out here (progress displays).
        """
        failures = self._carry(cast(Calls, work), api_key, cast(OnDone, on_job_done))
        return cast(list[tuple[_Key, BaseException]], failures)

    @abstractmethod
    def _carry(self, work: Calls, api_key: str | None, on_done: OnDone) -> Failures: ...

    def holding(self, work: Work) -> contextlib.AbstractContextManager[None]:
        """What a job of `work` holds while it runs, so recovery knows it is in hand
        (nothing, unless the carrier says otherwise)."""
        return contextlib.nullcontext()

    def group_recorded(self, job_id: int, group_id: int) -> None:  # noqa: B027  a no-op hook
        """A training group was recorded (a waiting trainer may wake up); nothing to do
        unless the carrier says otherwise."""
