"""Training rollouts end to end on the orchestrator's side: a job over a bandit dataset,
a round rolled out against the deterministic OpenAI test server and the real executor,
the ledger it leaves, and the trainer's claim and report of a step (PostgreSQL and SQLite).

The "model" answers choice 0 wrong (n + 1), choice 1 right (2n), choice 2 with no code.
The problem has 2 public and 2 hidden tests, so p is 0, 1 and 0 of 4.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.rollouts.request_seeds import request_seed
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.models import TrainingJob, TrainingSample
from cobalt.orchestrator.training import service
from cobalt.shared.clients import ExecutorAddress
from cobalt.shared.contracts.training import StepClaim, StepReport, TrainingJobCreate
from cobalt.shared.errors import Conflict, InvalidInput, Unavailable
from tests.fakes.openai_server import FakeOpenAI
from tests.support.training import WRONG, groups, roll_out_round, start_job


def test_a_round_samples_executes_scores_and_records_every_group(
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    fake, url = model
    job_id = start_job(sessions, url, policy_dir)
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    context_ids = roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor_url))
    assert len(context_ids) == 2 and len(fake.requests) == 2
    assert all(request["n"] == 3 for request in fake.requests)
    # Groups are rolled out at once, so they are stored in the order they finished.
    recorded = {g.context_key: g for g in groups(sessions)}
    assert sorted(recorded) == sorted(f"bandit:{i}" for i in context_ids)
    assert {g.policy_version for g in recorded.values()} == {7}  # the server's header
    wrong, right, no_code = recorded[f"bandit:{context_ids[1]}"].samples  # prev_best 0.25
    assert right.verdicts == ["accepted"] * 4 and right.total == 1.0
    assert no_code.no_code and no_code.total == -1.0 and no_code.verdicts == []
    assert wrong.pass_rate == 0.0 and wrong.improvement_rule == "replaced"
    assert wrong.before_format == pytest.approx(-0.2)  # -0.1 + 0.1 (0 - .25) / .25
    assert wrong.response_token_ids == [ord(ch) for ch in WRONG]  # exactly what was sampled
    assert len(wrong.response_logprobs) == len(WRONG)
    assert wrong.prompt_token_ids and wrong.reflection_keywords == 2  # "but", "verify"

    # Scheduling the round again (a restarted scheduler) writes nothing new.
    assert (
        roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor_url)) == context_ids
    )
    with sessions() as session:
        assert session.query(TrainingSample).count() == 6


def test_a_seeded_job_gives_each_group_its_own_seed(
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    """A job's sampling seed, sent as it was, gave every group of every round the same
    random numbers: each group's request now carries one derived from the seed, its
    context and its round (its n choices take seed + i from the server)."""
    fake, url = model
    job_id = start_job(sessions, url, policy_dir, rollout={"seed": 7})
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    executor = ExecutorAddress(executor_url)
    sent = []
    for round in (1, 2):
        fake.requests.clear()
        context_ids = roll_out_round(settings, job_id, round, executor=executor)
        expected = {request_seed(7, f"bandit:{i}", round) for i in context_ids}
        assert {request["seed"] for request in fake.requests} == expected
        sent.extend(request["seed"] for request in fake.requests)
    assert len(set(sent)) == len(sent) == 4


def test_the_trainer_claims_and_reports_a_step(
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    _, url = model
    job_id = start_job(sessions, url, policy_dir)
    claim = StepClaim(groups=2, current_version=7, max_staleness=0)
    assert not service.claim_step(sessions, job_id, 1, claim).ready  # nothing rolled out yet
    with pytest.raises(Conflict, match="never claimed"):
        service.report_step(sessions, job_id, StepReport(step=1, policy_version=8))
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor_url))
    batch = service.claim_step(sessions, job_id, 1, claim)
    assert batch.ready and len(batch.groups) == 2 and batch.stale == 0
    assert [s.reward for s in batch.groups[0].samples][1:] == [1.0, -1.0]
    assert batch == service.claim_step(sessions, job_id, 1, claim)  # a resumed trainer
    report = StepReport(step=1, policy_version=8, metrics={"reward_mean": 0.1})
    service.report_step(sessions, job_id, report)
    service.report_step(sessions, job_id, report)  # reported twice: recorded once
    shown = service.job_public(sessions, job_id)
    assert (shown.step, shown.policy_version, shown.status) == (1, 8, "running")
    assert [s.step for s in shown.steps] == [1] and shown.steps[0].metrics == {"reward_mean": 0.1}
    assert shown.groups == {"ready": 0, "consumed": 2, "stale": 0, "dropped": 0}
    assert service.list_jobs(sessions).items[0].steps == []


def test_a_group_from_a_server_behind_the_job_is_refused_and_rolled_out_once_it_caught_up(
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    fake, url = model
    job_id = start_job(sessions, url, policy_dir)
    with sessions.begin() as session:  # the trainer has reported version 9
        job = session.get(TrainingJob, job_id)
        assert job is not None
        job.policy_version = 9
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    executor = ExecutorAddress(executor_url)
    # The server restarted on older weights (7): its groups could never be trained on.
    with pytest.raises(Unavailable, match="served policy version 7, behind training job"):
        roll_out_round(settings, job_id, 1, executor=executor)
    assert groups(sessions) == []  # nothing holds the round's slots
    fake.policy_version = 9  # the trainer loaded the current weights into it
    roll_out_round(settings, job_id, 1, executor=executor)
    assert [g.policy_version for g in groups(sessions)] == [9, 9]
    claim = StepClaim(groups=2, current_version=9, max_staleness=0)
    assert service.claim_step(sessions, job_id, 1, claim).ready


def test_round_slices_wrap_and_bad_jobs_are_refused(
    sessions: sessionmaker[Session], model: tuple[FakeOpenAI, str], policy_dir: Path
) -> None:
    _, url = model
    job_id = start_job(sessions, url, policy_dir, contexts_per_step=1, updates_per_step=1)
    with sessions() as session:
        rounds = [service.context_ids_for_round(session, job_id=job_id, round=r) for r in (1, 2, 3)]
    assert rounds[0] != rounds[1] and rounds[0] == rounds[2]  # two contexts: an epoch is 2
    too_many = TrainingJobCreate(
        name="big",
        contexts="ctx",
        model="m",
        params={"trainer": {"contexts_per_step": 3, "updates_per_step": 1}},
    )
    with pytest.raises(InvalidInput, match="has 2 contexts"):
        service.create_job(sessions, too_many)
    bad = TrainingJobCreate(
        name="bad", contexts="ctx", model="m", params={"trainer": {"n_samples": 1}}
    )
    with pytest.raises(InvalidInput, match="n_samples"):
        service.create_job(sessions, bad)
    single = TrainingJobCreate(
        name="single", contexts="ctx", model="m", mode="single-turn",
        params={"trainer": {"contexts_per_step": 2}},
    )  # fmt: skip
    with pytest.raises(InvalidInput, match="has 1 contexts for mode single-turn"):
        service.create_job(sessions, single)


def test_a_job_in_the_instruct_format_scores_without_the_thinking_terms(
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    """The job's reward_format reaches the scoring of its groups: the same wrong answer as
    above loses its thinking bonus (T = 0, no reflection words), so its total is r."""
    job_id = start_job(sessions, model[1], policy_dir, rollout={"reward_format": "instruct"})
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    context_ids = roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor_url))
    recorded = {g.context_key: g for g in groups(sessions)}
    wrong, right, _ = recorded[f"bandit:{context_ids[1]}"].samples  # prev_best 0.25
    assert right.total == 1.0
    assert wrong.reflection_keywords == 0 and wrong.think_tokens == 0
    assert wrong.format == 0.0 and wrong.total == pytest.approx(-0.2)
    bad = TrainingJobCreate(
        name="bad", contexts="ctx", model=str(policy_dir), params={"reward_format": "thinking"}
    )
    with pytest.raises(InvalidInput, match="reward_format"):
        service.create_job(sessions, bad)
