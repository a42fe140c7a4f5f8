"""The carrier: how work is carried out, "on the queue" or "in this process", chosen once.

Each entry point (the API's `create_app`, the CLI's commands, `cobalt worker`, the demo)
chooses its carrier once with `carrier_for` (or `queue_carrier`: the one reader of
COBALT_REDIS_URL) and hands it on; nothing below asks the settings again (rq makes the
same choice a property of its queue object):

- `QueueCarrier` (`worker.queue`): work goes on the Redis queue, `cobalt worker`
  processes take it; a job holds its lease while it runs (`worker.lease`), and the
  recovery sweep queues again what the queue lost (`worker.recovery`);
- `ThreadCarrier` (`worker.in_process`): work runs in a thread pool of this process.

Both are a `Carrier` (`worker.carrier_base`).

What one job makes due (a training round's refill) is carried by the carrier that
carried the job, so each such rule is written once (`worker.jobs`).
"""

from __future__ import annotations

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.worker.carrier_base import Carrier
from cobalt.orchestrator.worker.in_process import ThreadCarrier
from cobalt.orchestrator.worker.queue import QueueCarrier
from cobalt.shared.clients import ExecutorAddress, ExecutorClientSettings

__all__ = ["Carrier", "QueueCarrier", "ThreadCarrier", "carrier_for", "queue_carrier"]


def carrier_for(
    settings: OrchestratorSettings,
    executor: ExecutorAddress | ExecutorClientSettings | None = None,
) -> Carrier:
    """The carrier the settings choose: the queue with COBALT_REDIS_URL, else threads of
    this process on `executor` (an address, or the settings of one).

    Raises:
        ValueError: no queue and no executor for the threads.
    """
    queue = queue_carrier(settings)
    if queue is not None:
        return queue
    if executor is None:
        raise ValueError("in-process jobs need an executor")
    return ThreadCarrier(settings, executor)


def queue_carrier(settings: OrchestratorSettings) -> QueueCarrier | None:
    """The queue carrier when the settings name a queue (COBALT_REDIS_URL), else None:
    the one place that asks."""
    return QueueCarrier(settings, settings.redis_url) if settings.redis_url else None
