"""Infrastructure errors are never rewards: a response the sandbox failed to judge is re-run,
then masked; a group left without two judged responses is dropped with its reason; past
the job's error budget the job fails naming the executor (issue 36).

The executor is the real one behind `FlakyExecutor`, which answers `sandbox_error` to the
programs that contain its marker. The scripted model answers choice 0 wrong (n + 1),
choice 1 right (2n), choice 2 with no code.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.models import TrainingJob
from cobalt.orchestrator.training import browse, service
from cobalt.shared.clients import ExecutorAddress
from cobalt.shared.contracts.training import StepClaim
from tests.fakes.flaky_executor import FlakyExecutor, serve_flaky_executor
from tests.fakes.openai_server import FakeOpenAI
from tests.support.training import WRONG, groups, roll_out_round, start_job

WRONG_CODE = "print(int(input()) + 1)"


def roll_round(store_url: str, job_id: int, flaky: FlakyExecutor, round: int = 1) -> list[int]:
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    with serve_flaky_executor(flaky) as url:
        return roll_out_round(settings, job_id, round, executor=ExecutorAddress(url))


def test_a_sandbox_error_is_run_again_and_scored_once_judged(
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    _, url = model
    job_id = start_job(sessions, url, policy_dir)
    flaky = FlakyExecutor(executor_url, marker="+ 1", failures=1)
    roll_round(store_url, job_id, flaky)
    recorded = groups(sessions)
    assert len(recorded) == 2 and {g.masked_samples for g in recorded} == {0}
    wrong = [s for g in recorded for s in g.samples if s.response == WRONG]
    assert [s.verdicts for s in wrong] == [["wrong_answer"] * 4] * 2  # its real verdicts
    assert flaky.runs_of(WRONG_CODE) == 3  # failed once, re-run, then judged for both contexts


def test_a_response_never_judged_is_masked_and_counted_by_the_step(
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    _, url = model
    job_id = start_job(sessions, url, policy_dir, rollout={"error_budget": 0.5})
    flaky = FlakyExecutor(executor_url, marker="+ 1")
    roll_round(store_url, job_id, flaky)
    recorded = groups(sessions)
    assert {g.status for g in recorded} == {"ready"} and [g.masked_samples for g in recorded] == [
        1,
        1,
    ]
    # The masked response is nowhere in the ledger: no gradient, no place in the statistics.
    assert all(s.response != WRONG for g in recorded for s in g.samples)
    assert all("sandbox_error" not in s.verdicts for g in recorded for s in g.samples)
    assert [s.sample_index for s in recorded[0].samples] == [1, 2]
    assert flaky.runs_of(WRONG_CODE) == 2 * 3  # each context: the run and two re-runs
    batch = service.claim_step(
        sessions, job_id, 1, StepClaim(groups=2, current_version=7, max_staleness=0)
    )
    assert batch.ready and batch.masked == 2 and batch.dropped == 0
    assert [len(g.samples) for g in batch.groups] == [2, 2]
    with sessions() as session:
        job = session.get(TrainingJob, job_id)
        assert job is not None and job.status != "failed"  # 2 of 6 is within 50%


def test_a_group_without_two_judged_responses_is_dropped_and_past_the_budget_the_job_fails(
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    _, url = model
    job_id = start_job(sessions, url, policy_dir, rollout={"judge_retries": 0})
    flaky = FlakyExecutor(executor_url, marker="print(")  # right and wrong: only no-code left
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    with serve_flaky_executor(flaky) as executor:
        roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor))
        recorded = groups(sessions)
        assert [g.status for g in recorded] == ["dropped", "dropped"]
        assert all(g.samples == [] and g.masked_samples == 2 for g in recorded)
        assert all(g.drop_reason is not None for g in recorded)
        assert "sandbox errors: 2 of 3 responses masked" in str(recorded[0].drop_reason)
        assert flaky.runs_of("2 * int") == 2  # no re-runs
        # 4 of 6 masked is past the default 5% budget: the job failed, naming the executor.
        shown = service.job_public(sessions, job_id)
        assert shown.status == "failed" and shown.error is not None
        assert executor in shown.error and "4 of 6" in shown.error
        assert shown.groups["dropped"] == 2
        # The next claimed step counts them; the step's page shows them with their reason.
        claim = StepClaim(groups=2, current_version=7, max_staleness=0)
        assert not service.claim_step(sessions, job_id, 1, claim).ready
        shown_groups = browse.step_groups(sessions, job_id, 1).groups
        assert [(g.status, g.masked_samples, g.samples) for g in shown_groups] == [
            ("dropped", 2, [])
        ] * 2
        assert all(g.drop_reason == recorded[0].drop_reason for g in shown_groups)
        # A retried round writes nothing twice, and a failed job rolls out nothing more.
        roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor))
        roll_out_round(settings, job_id, 2, executor=ExecutorAddress(executor))
    assert len(groups(sessions)) == 2
