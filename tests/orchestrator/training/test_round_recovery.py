"""Lost training work is recovered by the orchestrator, under either carrier: the ledger
knows a running job's open rounds (`training.staleness.open_rounds`), so a sweep
(`worker.recovery`) carries again the groups nothing holds, once seen lost for the grace,
and the trainer needs no restart timer. On the queue the jobs were lost with Redis
emptied; in this process, with the threads of a process that died."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
from redis import Redis
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.training import service
from cobalt.orchestrator.worker.in_process import ThreadCarrier, in_flight
from cobalt.orchestrator.worker.recovery import ThreadWhereabouts, recover_lost_jobs, sweep
from cobalt.orchestrator.worker.work import group_queue_id
from cobalt.shared.clients import ExecutorAddress
from tests.fakes.openai_server import FakeOpenAI
from tests.support.chaos import wait_until
from tests.support.runs import REDIS_URL
from tests.support.training import groups, start_job, work_the_queue

INTERVAL_S = 0.2
GRACE_S = 2 * INTERVAL_S  # recovery.GRACE_INTERVALS intervals

Sweep = Callable[[], list[str]]


@pytest.fixture(params=["queue", "threads"])
def carried(
    request: pytest.FixtureRequest, store_url: str, executor_url: str
) -> Iterator[tuple[Sweep, Callable[[], None]]]:
    """(one sweep, wait for what the sweeps carried again to be done)."""
    executor = ExecutorAddress(executor_url)
    if request.param == "threads":
        settings = OrchestratorSettings(database_url=store_url, redis_url=None)
        here = ThreadWhereabouts(ThreadCarrier(settings, executor))
        sessions = _sessions(settings)

        def settle() -> None:
            wait_until(lambda: len(groups(sessions)) >= 2 and not in_flight(), 60, "the groups")

        yield partial(sweep, here, sessions, grace_s=GRACE_S, runs=False), settle
        return
    settings = OrchestratorSettings(
        database_url=store_url, redis_url=REDIS_URL, run_recovery_interval_s=INTERVAL_S
    )
    with Redis.from_url(REDIS_URL) as redis:
        redis.flushdb()
        sessions = _sessions(settings)
        yield (
            partial(recover_lost_jobs, settings, sessions, redis),
            partial(work_the_queue, settings, executor),
        )
        redis.flushdb()


def _sessions(settings: OrchestratorSettings) -> sessionmaker[Session]:
    from cobalt.orchestrator.worker.runtime import sessions_for

    return sessions_for(settings.database_url)


@pytest.mark.parametrize("store_url", ["postgresql"], indirect=True)
def test_a_started_rounds_lost_groups_are_carried_again_once_seen_lost_for_the_grace(
    carried: tuple[Sweep, Callable[[], None]],
    sessions: sessionmaker[Session],
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    sweep_once, settle = carried
    job_id = start_job(sessions, model[1], policy_dir, contexts_per_step=2, updates_per_step=1)
    contexts = service.begin_round(sessions, job_id, 1)  # the trainer started round 1 ...
    ids = sorted(group_queue_id(job_id, 1, c) for c in contexts)
    assert len(ids) == 2  # ... and the work carrying it was lost (Redis emptied, threads gone)
    assert sweep_once() == []  # lost, not for long yet
    time.sleep(GRACE_S * 1.25)
    assert sweep_once() == ids
    assert sweep_once() == []  # in hand now: waiting on the queue, or in flight here
    settle()
    recorded = groups(sessions)
    assert sorted(g.context_key for g in recorded) == sorted(f"bandit:{c}" for c in contexts)
    assert {g.round for g in recorded} == {1}  # each group once
    assert sweep_once() == []  # the round is complete: nothing left open
