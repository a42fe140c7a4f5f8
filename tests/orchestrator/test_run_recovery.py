"""Run recovery (`worker.recovery`): a run's jobs the queue lost (their worker killed,
Redis emptied, their retry never queued) are queued again from the database's open
trajectories (a training round's from the ledger's open rounds), and only those: not a
job waiting on the queue, not one a live worker holds the lease of. And a failed job RQ
will retry leaves its trajectories open."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
import rq
from redis import Redis
from rq import Queue
from rq.job import Job, JobStatus
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store import repo_trajectories
from cobalt.orchestrator.store.models import Run
from cobalt.orchestrator.worker.carrier import queue_carrier
from cobalt.orchestrator.worker.carry_out import start_round
from cobalt.orchestrator.worker.jobs import JobResources, run_problem
from cobalt.orchestrator.worker.lease import held_lease
from cobalt.orchestrator.worker.queue import QUEUE_NAME
from cobalt.orchestrator.worker.recovery import recover_lost_jobs
from cobalt.shared.clients import ExecutorAddress
from cobalt.shared.errors import CobaltError
from tests.fakes.openai_server import FakeOpenAI
from tests.support.chaos import kill_9, wait_until
from tests.support.runs import REDIS_URL, json_out, keys_and_answers, run_sample, worker
from tests.support.training import start_job

INTERVAL_S = 0.2


@pytest.fixture
def redis(rq_env: dict[str, str]) -> Iterator[Redis]:
    with Redis.from_url(REDIS_URL) as connection:
        yield connection


@pytest.fixture
def settings(postgresql_url: str) -> OrchestratorSettings:
    """The queue and database of `rq_env`, swept every INTERVAL_S."""
    return OrchestratorSettings(
        database_url=postgresql_url, redis_url=REDIS_URL, run_recovery_interval_s=INTERVAL_S
    )


def detached_run(rq_env: dict[str, str], dataset: str, url: str, *options: str) -> int:
    """A run of the two "doubles" problems queued (no worker yet): two jobs on the queue."""
    done = run_sample(rq_env, dataset, url, "fake-model", *options, "--detach", "--json")
    return int(json_out(done)["run_id"])


def test_jobs_lost_with_redis_are_queued_again_once_seen_lost_for_the_grace(
    pg_dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    rq_env: dict[str, str],
    pg_sessions: sessionmaker[Session],
    settings: OrchestratorSettings,
    redis: Redis,
) -> None:
    run_id = detached_run(rq_env, pg_dataset, fake_model[1], "--n", "2")
    queue = Queue(QUEUE_NAME, connection=redis)
    ids = sorted(queue.job_ids)
    assert len(ids) == 2
    assert recover_lost_jobs(settings, pg_sessions, redis) == []  # both wait on the queue

    redis.flushdb()  # Redis restarted empty: the queue and the job records are gone
    first, second = ids
    with held_lease(REDIS_URL, first, INTERVAL_S):  # a live worker still rolls `first` out
        assert recover_lost_jobs(settings, pg_sessions, redis) == []  # lost, not for long yet
        time.sleep(INTERVAL_S * 2.5)
        assert recover_lost_jobs(settings, pg_sessions, redis) == [second]
    assert queue.job_ids == [second]
    assert recover_lost_jobs(settings, pg_sessions, redis) == []  # it waits on the queue now

    # The lease of `first` is gone (its job ended without finishing its trajectories).
    recover_lost_jobs(settings, pg_sessions, redis)
    time.sleep(INTERVAL_S * 2.5)
    assert recover_lost_jobs(settings, pg_sessions, redis) == [first]
    assert sorted(queue.job_ids) == ids
    with pg_sessions() as session:
        assert session.get(Run, run_id).status == "pending"  # type: ignore[union-attr]


def test_a_retry_no_scheduler_queued_is_queued_again_and_only_once(
    pg_dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    rq_env: dict[str, str],
    pg_sessions: sessionmaker[Session],
    settings: OrchestratorSettings,
    redis: Redis,
) -> None:
    """RQ's scheduler runs in one worker; killed with it, the retries it would have queued
    wait in the scheduled registry until RQ hands the scheduler on, minutes later."""
    detached_run(rq_env, pg_dataset, fake_model[1])
    queue = Queue(QUEUE_NAME, connection=redis)
    retried, waiting = sorted(queue.job_ids)
    job = Job.fetch(retried, connection=redis)
    queue.remove(retried)
    job.set_status(JobStatus.SCHEDULED)
    queue.scheduled_job_registry.schedule(job, datetime.now(UTC) + timedelta(seconds=60))
    assert recover_lost_jobs(settings, pg_sessions, redis) == []  # due in a minute
    queue.scheduled_job_registry.schedule(job, datetime.now(UTC) - timedelta(seconds=5))
    assert recover_lost_jobs(settings, pg_sessions, redis) == []  # overdue: lost from now
    time.sleep(INTERVAL_S * 2.5)
    assert recover_lost_jobs(settings, pg_sessions, redis) == [retried]
    assert sorted(queue.job_ids) == [retried, waiting]
    assert queue.scheduled_job_registry.get_job_ids() == []  # no scheduler queues it again


def test_a_job_a_killed_worker_took_but_never_started_is_queued_again(
    pg_dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    rq_env: dict[str, str],
    pg_sessions: sessionmaker[Session],
    settings: OrchestratorSettings,
    redis: Redis,
) -> None:
    """RQ's dequeue moves a job to an intermediate list before its worker starts it; a
    worker killed in between leaves it marked queued and on no queue, and RQ's maintenance
    fails it only ten minutes later (a training chaos run waited 4 minutes for its round).
    It is lost once the grace has passed, and queued again without the stale copy."""
    detached_run(rq_env, pg_dataset, fake_model[1])
    queue = Queue(QUEUE_NAME, connection=redis)
    taken, waiting = sorted(queue.job_ids)
    redis.lrem(queue.key, 1, taken)  # what RQ's dequeue does (LMOVE), and no more
    redis.rpush(queue.intermediate_queue_key, taken)
    assert Job.fetch(taken, connection=redis).get_status() == JobStatus.QUEUED
    assert recover_lost_jobs(settings, pg_sessions, redis) == []  # a worker may start it yet
    time.sleep(INTERVAL_S * 2.5)
    assert recover_lost_jobs(settings, pg_sessions, redis) == [taken]
    assert sorted(queue.job_ids) == [taken, waiting]
    assert redis.lrange(queue.intermediate_queue_key, 0, -1) == []
    assert recover_lost_jobs(settings, pg_sessions, redis) == []  # it waits on the queue now


def test_a_job_rq_gave_up_on_fails_its_run_with_the_reason(
    pg_dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    rq_env: dict[str, str],
    pg_sessions: sessionmaker[Session],
    settings: OrchestratorSettings,
    redis: Redis,
) -> None:
    run_id = detached_run(rq_env, pg_dataset, fake_model[1])
    queue = Queue(QUEUE_NAME, connection=redis)
    given_up = Job.fetch(sorted(queue.job_ids)[0], connection=redis)
    given_up.set_status(JobStatus.FAILED)
    assert recover_lost_jobs(settings, pg_sessions, redis) == []
    with pg_sessions() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.status == "failed"
        assert f"job {given_up.id} failed" in (run.error or "")
        assert f"cobalt run resume {run_id}" in (run.error or "")


def test_a_killed_workers_job_is_finished_by_another_without_a_resume(
    pg_dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    rq_env: dict[str, str],
    pg_sessions: sessionmaker[Session],
) -> None:
    fake, url = fake_model
    fake.delay_s = 0.4  # every model call takes a while, so the kill lands mid-job
    run_id = detached_run(rq_env, pg_dataset, url, "--n", "2", "--turns", "3")
    env = {**rq_env, "COBALT_RUN_RECOVERY_INTERVAL_S": str(INTERVAL_S)}
    victim = worker(env)
    try:
        wait_until(lambda: len(keys_and_answers(pg_sessions, run_id)) >= 3, 120, "a turn")
        kill_9(victim)  # its job stays "started" in RQ, held by no one
        before = keys_and_answers(pg_sessions, run_id)
        assert len(before) < 2 * 2 * 4, "the kill should land mid-run"
        finisher = worker(env)
        try:

            def ended() -> bool:
                with pg_sessions() as session:
                    return session.get(Run, run_id).status != "running"  # type: ignore[union-attr]

            wait_until(ended, 120, "the run's end")
        finally:
            kill_9(finisher)
    finally:
        kill_9(victim)
    with pg_sessions() as session:
        assert session.get(Run, run_id).status == "finished"  # type: ignore[union-attr]
    after = keys_and_answers(pg_sessions, run_id)
    assert sorted(after) == [
        (p, s, t) for p in sorted({k[0] for k in after}) for s in range(2) for t in range(4)
    ]
    assert {k: after[k] for k in before} == before  # what was written stays as written


@pytest.mark.parametrize("retries_left", [1, 0])
def test_a_failed_job_rq_will_retry_leaves_its_trajectories_pending(
    retries_left: int,
    pg_dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    rq_env: dict[str, str],
    pg_sessions: sessionmaker[Session],
    settings: OrchestratorSettings,
    executor_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Failed, the trajectories of the run's last open problem would end the run (failed)
    while RQ still retries the job, and the retry that finishes them would leave it so."""
    fake, url = fake_model
    run_id = detached_run(rq_env, pg_dataset, url)
    fake.fail_next = [400] * 10  # refused outright: no client retry
    monkeypatch.setattr(rq, "get_current_job", lambda: SimpleNamespace(retries_left=retries_left))
    resources = JobResources.here(settings, ExecutorAddress(executor_url), api_key=None)
    with pg_sessions() as session:
        problem_id = repo_trajectories.open_problem_ids(session, run_id=run_id)[0]
    with pytest.raises(CobaltError):
        run_problem(run_id, problem_id, resources=resources)
    with pg_sessions() as session:
        statuses = {
            t.status for t in repo_trajectories.trajectories_of(session, run_id=run_id)
            if t.problem_id == problem_id
        }  # fmt: skip
    assert statuses == ({"pending"} if retries_left else {"failed"})


def test_a_training_rounds_lost_group_jobs_are_queued_again_without_the_trainer(
    rq_env: dict[str, str],
    pg_sessions: sessionmaker[Session],
    settings: OrchestratorSettings,
    redis: Redis,
    tmp_path: Path,
) -> None:
    """The ledger knows a running job's open rounds: their contexts with no group yet are
    work the queue should hold, swept like a run's open problems."""
    job_id = start_job(pg_sessions, "http://127.0.0.1:9/v1", tmp_path, contexts_per_step=2)
    carrier = queue_carrier(settings)
    assert carrier is not None
    start_round(carrier, pg_sessions, job_id, 1)  # the trainer's step 1: its one open round
    queue = Queue(QUEUE_NAME, connection=redis)
    ids = sorted(queue.job_ids)
    assert len(ids) == 2 and all(i.startswith(f"cobalt-train-{job_id}-1-") for i in ids)
    assert recover_lost_jobs(settings, pg_sessions, redis) == []  # both wait on the queue

    redis.flushdb()  # Redis restarted empty
    assert recover_lost_jobs(settings, pg_sessions, redis) == []  # lost, not for long yet
    time.sleep(INTERVAL_S * 2.5)
    assert recover_lost_jobs(settings, pg_sessions, redis) == ids
    assert sorted(queue.job_ids) == ids
    assert recover_lost_jobs(settings, pg_sessions, redis) == []  # they wait on the queue now
