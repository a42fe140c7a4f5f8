"""Online filter and refill (DAPO's dynamic sampling): with `filter_zero_variance` a group
whose responses all got one reward is dropped with its reason, the round takes more
contexts until the step has its informative groups or its refills are spent, and the
ledger accounts for every sampled group exactly once (PostgreSQL and SQLite; carried out
in threads of this process and on the queue).

The test dataset has two contexts of one problem, in this order: the problem alone (the
scripted model answers it wrong, right, without code: variance) and the context after a
wrong first turn, which `flat_after_feedback` answers right every time (no variance).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.models import TrainingJob
from cobalt.orchestrator.training import service
from cobalt.shared.clients import ExecutorAddress
from cobalt.shared.contracts.training import StepBatch, StepClaim
from cobalt.shared.errors import Conflict
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.runs import REDIS_URL
from tests.support.training import (
    RIGHT,
    flat_after_feedback,
    groups,
    roll_out_queued,
    roll_out_round,
    start_job,
)

FILTER = {"filter_zero_variance": True, "max_refill_rounds": 2}


RollOut = Callable[[int, int], list[int]]
"""Carries out round r of job j (`roll_out(j, r)`) and waits for it: its contexts."""


@pytest.fixture(params=["threads", "queue"])
def roll_out(
    request: pytest.FixtureRequest, store_url: str, executor_url: str
) -> Iterator[RollOut]:
    """Each test runs under both carriers: threads of this process, and the Redis queue
    with an RQ worker of this process (the refill then goes through the queue)."""
    executor = ExecutorAddress(executor_url)
    if request.param == "threads":
        settings = OrchestratorSettings(database_url=store_url, redis_url=None)
        yield partial(_threads, settings, executor=executor)
        return
    settings = OrchestratorSettings(database_url=store_url, redis_url=REDIS_URL)
    with Redis.from_url(REDIS_URL) as redis:
        redis.flushdb()
        yield partial(roll_out_queued, settings, executor=executor)
        redis.flushdb()


def _threads(settings: OrchestratorSettings, job_id: int, round: int, *,
             executor: ExecutorAddress) -> list[int]:  # fmt: skip
    return roll_out_round(settings, job_id, round, executor=executor)


def roll_and_claim(
    sessions: sessionmaker[Session], roll_out: RollOut, job_id: int, step: int, per_step: int
) -> StepBatch:
    roll_out(job_id, step)
    claim = StepClaim(groups=per_step, current_version=7, max_staleness=0)
    return service.claim_step(sessions, job_id, step, claim)


def spread(batch: StepBatch) -> list[float]:
    """Each trained group's reward spread (max - min over its samples)."""
    return [
        max(s.reward for s in g.samples) - min(s.reward for s in g.samples) for g in batch.groups
    ]


def test_a_step_trains_on_no_zero_variance_group_and_the_ledger_keeps_each_once(
    sessions: sessionmaker[Session], roll_out: RollOut, policy_dir: Path
) -> None:
    fake = FakeOpenAI(responder=flat_after_feedback)
    with serve_fake_openai(fake) as url:
        job_id = start_job(
            sessions, url, policy_dir, rollout=FILTER, contexts_per_step=1, updates_per_step=1
        )
        batches = [roll_and_claim(sessions, roll_out, job_id, s, 1) for s in (1, 2, 3)]
        # Asked again (a resumed trainer), each step holds the same groups.
        claim = StepClaim(groups=1, current_version=7, max_staleness=0)
        again = [service.claim_step(sessions, job_id, s, claim) for s in (1, 2, 3)]
    assert again == batches
    assert all(b.ready and len(b.groups) == 1 for b in batches)
    assert all(value > 0 for b in batches for value in spread(b))
    # Round 2 starts at the flat context: dropped, then refilled with the other one.
    assert [(b.dropped_zero_variance, b.refill_rounds) for b in batches] == [(0, 0), (1, 1), (0, 0)]
    assert len(fake.requests) == 4  # 3 rounds, one refill
    ledger = groups(sessions)
    keys = [(g.context_key, g.round) for g in ledger]
    assert len(keys) == len(set(keys)) == 4  # each sampled group once
    assert all(g.step is not None for g in ledger)  # and each accounted to a step
    dropped = [g for g in ledger if g.status == "dropped"]
    assert len(dropped) == 1 and dropped[0].round == 2 and dropped[0].step == 2
    assert str(dropped[0].drop_reason).startswith("zero_variance")
    assert [s.response for s in dropped[0].samples] == [RIGHT] * 3  # kept for the record
    consumed = sorted((g.step, g.round) for g in ledger if g.status == "consumed")
    assert consumed == [(1, 1), (2, 2), (3, 3)]
    # The round is complete: scheduling it again rolls out nothing.
    assert roll_out(job_id, 2) == []
    assert len(groups(sessions)) == 4


def test_off_by_default_a_zero_variance_group_is_trained_on(
    sessions: sessionmaker[Session], roll_out: RollOut, policy_dir: Path
) -> None:
    with serve_fake_openai(FakeOpenAI(responder=flat_after_feedback)) as url:
        job_id = start_job(sessions, url, policy_dir, contexts_per_step=1, updates_per_step=1)
        roll_out(job_id, 2)  # the flat one
        claim = StepClaim(groups=1, current_version=7, max_staleness=0)
        batch = service.claim_step(sessions, job_id, 1, claim)
    assert batch.ready and spread(batch) == [0.0]  # the paper's behaviour
    assert (batch.dropped_zero_variance, batch.refill_rounds) == (0, 0)


def test_a_round_that_spent_its_stream_trains_on_the_informative_groups_it_has(
    sessions: sessionmaker[Session], roll_out: RollOut, policy_dir: Path
) -> None:
    with serve_fake_openai(FakeOpenAI(responder=flat_after_feedback)) as url:
        job_id = start_job(sessions, url, policy_dir, rollout=FILTER, contexts_per_step=2)
        batch = roll_and_claim(sessions, roll_out, job_id, 1, 2)
    # Both contexts are the round's first batch; no third one to refill with.
    assert batch.ready and len(batch.groups) == 1 and spread(batch)[0] > 0
    assert (batch.dropped_zero_variance, batch.refill_rounds) == (1, 0)
    claim = StepClaim(groups=2, current_version=7, max_staleness=0)
    assert service.claim_step(sessions, job_id, 1, claim) == batch


@pytest.mark.parametrize("refills", [0, 1])
def test_a_round_without_one_informative_group_fails_the_job(
    refills: int, sessions: sessionmaker[Session], roll_out: RollOut,
    policy_dir: Path,
) -> None:  # fmt: skip
    rollout: dict[str, Any] = {"filter_zero_variance": True, "max_refill_rounds": refills}
    with serve_fake_openai(FakeOpenAI(responder=lambda messages, index: RIGHT)) as url:
        job_id = start_job(
            sessions, url, policy_dir, rollout=rollout, contexts_per_step=1, updates_per_step=1
        )
        with pytest.raises(Conflict, match=f"zero reward variance .* after {refills} refill"):
            roll_and_claim(sessions, roll_out, job_id, 1, 1)
    with sessions() as session:
        job = session.get(TrainingJob, job_id)
        assert job is not None and job.status == "failed"
        assert job.error is not None and "filter_zero_variance" in job.error
    assert [g.status for g in groups(sessions)] == ["dropped"] * (1 + refills)


def test_the_scheduler_orders_from_the_ledger_and_a_replay_takes_the_same_contexts(
    sessions: sessionmaker[Session], roll_out: RollOut, policy_dir: Path
) -> None:
    """Round 2 would take the flat context (the rotated order's next), but the ledger knows
    the problem alone had variance in round 1: the scheduler prefers it, in every round;
    asked again after later steps (a replay), each round takes the same contexts."""
    rollout = {"schedule_contexts": True, "schedule_window": 1, "revisit_probability": 0.0}
    with serve_fake_openai(FakeOpenAI(responder=flat_after_feedback)) as url:
        job_id = start_job(sessions, url, policy_dir, rollout=rollout, contexts_per_step=1,
                           updates_per_step=1)  # fmt: skip
        with sessions() as session:
            plain = service.context_ids_for_round(session, job_id=job_id, round=2)
            rounds = [service.begin_round(sessions, job_id, 1)]
        batches = [roll_and_claim(sessions, roll_out, job_id, 1, 1)]
        with pytest.raises(Conflict, match="claim that step first"):
            service.begin_round(sessions, job_id, 3)  # step 2 is not claimed yet
        for step in (2, 3):
            rounds.append(service.begin_round(sessions, job_id, step))
            batches.append(roll_and_claim(sessions, roll_out, job_id, step, 1))
        with sessions() as session:  # replayed after more steps: the same contexts
            replayed = [service.context_ids_for_round(session, job_id=job_id, round=r)
                        for r in (1, 2, 3)]  # fmt: skip
    assert replayed == rounds
    assert plain != rounds[0]  # before any visit: the rotated order
    assert rounds[1] == rounds[2] == rounds[0]  # after one: variance first
    assert all(spread(b)[0] > 0 for b in batches)
    ledger = groups(sessions)
    assert sorted(g.round for g in ledger) == [1, 2, 3] and {g.status for g in ledger} == {
        "consumed"
    }
