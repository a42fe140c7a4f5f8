"""A job's step budget (`max_steps`, `epochs`): the steps it takes per mode, no round past
it, the last step's report finishing the job through the state machine, and a finished
job's resume saying there is nothing left to do (service, REST API, CLI). The slow test
runs the real trainer (.venv-trainer, the tiny model) until the job ends by itself.

The test bandit dataset has 2 contexts of one problem: the cobalt mode trains on both, the
single-turn and episode modes on the turn-0 one (one a problem).
"""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store import repo_training
from cobalt.orchestrator.store.models import TrainingGroup, TrainingJobStatus
from cobalt.orchestrator.training import service
from cobalt.shared.clients import ExecutorAddress
from cobalt.shared.contracts.training import StepClaim, StepReport, TrainingJobCreate
from cobalt.shared.errors import Conflict, InvalidInput
from tests.fakes.openai_server import FakeOpenAI
from tests.support.runs import cobalt, json_out
from tests.support.serving import serve_asgi
from tests.support.training import TRAINER_PYTHON, bandit_dataset, roll_out_round


def create(
    sessions: sessionmaker[Session],
    *,
    mode: str = "cobalt",
    per_step: int = 1,
    name: str = "job",
    url: str = "http://127.0.0.1:9/v1",
    model: str = "m",
    **budget: Any,
) -> int:
    request = TrainingJobCreate(
        name=name, contexts="ctx", model=model, mode=mode,
        params={"base_url": url, "served_model": "fake-model", **budget,
                "trainer": {"n_samples": 3, "contexts_per_step": per_step,
                            "updates_per_step": 1}},
    )  # fmt: skip
    return service.create_job(sessions, request)


@pytest.mark.parametrize(
    ("mode", "per_step", "budget", "steps"),
    [
        ("cobalt", 1, {}, None),  # no budget: until stopped
        ("cobalt", 1, {"max_steps": 7}, 7),
        ("cobalt", 1, {"epochs": 1}, 2),  # 2 contexts, one a step
        ("cobalt", 2, {"epochs": 3}, 3),
        ("cobalt", 1, {"epochs": 3, "max_steps": 4}, 4),  # whichever is spent first
        ("cobalt", 1, {"epochs": 1, "max_steps": 5}, 2),
        ("single-turn", 1, {"epochs": 2}, 2),  # the turn-0 context only
        ("multi-turn", 1, {"epochs": 3}, 3),  # one problem
        ("verpo", 1, {"epochs": 1}, 1),
    ],
)
def test_the_step_budget_counts_the_contexts_each_mode_trains_on(
    sessions: sessionmaker[Session],
    mode: str,
    per_step: int,
    budget: dict[str, int],
    steps: int | None,
) -> None:
    bandit_dataset(sessions)
    job_id = create(sessions, mode=mode, per_step=per_step, **budget)
    job = service.job_public(sessions, job_id)
    assert job.step_budget == steps
    assert {k: getattr(job.params, k) for k in budget} == budget  # stored as given


@pytest.mark.parametrize("budget", [{"max_steps": 0}, {"epochs": 0}, {"epochs": 1.5}])
def test_a_bad_budget_is_refused_with_its_name(
    sessions: sessionmaker[Session], budget: dict[str, Any]
) -> None:
    bandit_dataset(sessions)
    with pytest.raises(InvalidInput, match=next(iter(budget))):
        create(sessions, **budget)


def test_the_last_step_s_report_finishes_the_job_and_no_round_is_past_it(
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    _, url = model
    bandit_dataset(sessions)
    job_id = create(sessions, url=url, model=str(policy_dir), max_steps=1)
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor_url))
    with pytest.raises(Conflict, match="round 2 is past training job .* budget of 1 steps"):
        service.begin_round(sessions, job_id, 2)
    claim = StepClaim(groups=1, current_version=0, max_staleness=0)
    assert service.claim_step(sessions, job_id, 1, claim).ready
    service.report_step(sessions, job_id, StepReport(step=1, policy_version=1))
    job = service.job_public(sessions, job_id)
    assert (job.status, job.step, job.liveness) == ("finished", 1, "ended")
    with pytest.raises(Conflict, match="has finished: its step budget is spent, nothing"):
        service.set_job_status(sessions, job_id, TrainingJobStatus.RUNNING)
    with pytest.raises(Conflict, match="has finished"):
        service.begin_round(sessions, job_id, 1)


def test_a_stopped_or_failed_job_whose_budget_is_spent_finishes(
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    """Stopped while its last step trained: the report finishes it. Failed after its last
    step: resuming it finishes it (nothing is left to train)."""
    _, url = model
    bandit_dataset(sessions)
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    claim = StepClaim(groups=1, current_version=0, max_staleness=0)
    jobs = [
        create(sessions, name=name, url=url, model=str(policy_dir), max_steps=1)
        for name in ("stopped", "failed")
    ]
    for job_id in jobs:
        roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor_url))
        assert service.claim_step(sessions, job_id, 1, claim).ready
    service.set_job_status(sessions, jobs[0], TrainingJobStatus.STOPPED)
    service.report_step(sessions, jobs[0], StepReport(step=1, policy_version=1))
    assert service.job_public(sessions, jobs[0]).status == "finished"
    service.report_step(sessions, jobs[1], StepReport(step=1, policy_version=1))
    with sessions.begin() as session:  # as a round failing in the API process leaves it
        job = repo_training.get_job(session, job_id=jobs[1], for_update=True)
        job.status, job.error = "failed", "boom"
    service.set_job_status(sessions, jobs[1], TrainingJobStatus.RUNNING)
    assert service.job_public(sessions, jobs[1]).status == "finished"


def test_the_cli_takes_the_budget_and_refuses_to_resume_a_finished_job(
    cli_env: dict[str, str], sessions: sessionmaker[Session], policy_dir: Path
) -> None:
    bandit_dataset(sessions)
    base = ["train", "start", "--contexts", "ctx", "--model", str(policy_dir),
            "--contexts-per-step", "1", "--updates-per-step", "1"]  # fmt: skip
    started = json_out(cobalt(cli_env, *base, "--max-steps", "3", "--epochs", "1", "--json"))
    assert (started["params"]["max_steps"], started["params"]["epochs"]) == (3, 1)
    assert started["step_budget"] == 2  # one epoch of 2 contexts comes first
    shown = cobalt(cli_env, "train", "show", str(started["id"]))
    assert "step 0 of its budget of 2" in shown.stdout
    refused = cobalt(cli_env, *base, "--max-steps", "0")
    assert refused.returncode == 2 and "max_steps" in refused.stderr
    with sessions.begin() as session:  # finished as the trainer's last report leaves it
        job = repo_training.get_job(session, job_id=started["id"], for_update=True)
        job.status, job.step = "finished", 2
        job.updated_at = datetime.now(UTC) - timedelta(hours=2)  # silent: ended, not stale
    # Refused, as the API refuses it (409): one line on stderr, exit status 2, no output.
    for extra in ((), ("--json",)):
        resumed = cobalt(cli_env, "train", "resume", str(started["id"]), *extra)
        assert (resumed.returncode, resumed.stdout) == (2, ""), resumed.stderr
        assert resumed.stderr.strip() == (
            f"error: training job {started['id']} has finished: its step budget is spent, "
            "nothing is left to do; start a new job to train further"
        )
    shown = cobalt(cli_env, "train", "show", str(started["id"]))
    assert ": finished," in shown.stdout and "stale:" not in shown.stdout


def consumed(
    sessions: sessionmaker[Session], job_id: int
) -> list[tuple[int | None, str, int, str]]:
    """(step, context, round, status) of every group of the job's ledger."""
    with sessions() as session:
        rows = session.execute(
            select(
                TrainingGroup.step, TrainingGroup.context_key, TrainingGroup.round,
                TrainingGroup.status,
            )
            .where(TrainingGroup.job_id == job_id)
            .order_by(TrainingGroup.round, TrainingGroup.id)
        ).all()  # fmt: skip
    return [(step, key, int(round), status) for step, key, round, status in rows]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("store_url", "budget"),
    [
        ("postgresql", {"max_steps": 2}),
        ("sqlite", {"max_steps": 2}),
        ("sqlite", {"epochs": 1}),  # 2 contexts, one a step: 2 steps
    ],
    indirect=["store_url"],
)
def test_a_real_trainer_ends_the_job_finished_after_its_budget(
    budget: dict[str, int],
    tiny_model: Path,
    store_url: str,
    executor_url: str,
    sessions: sessionmaker[Session],
    model: tuple[FakeOpenAI, str],
    cli_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The trainer runs with no --steps of its own: the job's budget ends it. Rollouts may
    run a round ahead (max_staleness 1), yet no round past the budget is rolled out."""
    _, url = model
    bandit_dataset(sessions)
    monkeypatch.setenv("COBALT_EXECUTOR_URL", executor_url)
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    with serve_asgi(create_app(settings)) as api_url, httpx.Client(base_url=api_url) as api:
        created = api.post(
            "/v1/training/jobs",
            json={"name": "budget", "contexts": "ctx", "model": str(tiny_model),
                  "params": {"base_url": url, "served_model": "fake-model", "max_staleness": 1,
                             **budget,
                             "trainer": {"n_samples": 2, "contexts_per_step": 1,
                                         "updates_per_step": 1, "lr": 1e-3}}},
        )  # fmt: skip
        assert created.status_code == 201, created.text
        job_id = created.json()["id"]
        env = {
            **base_env,
            "COBALT_TRAINER_ORCHESTRATOR_URL": api_url,
            "COBALT_TRAINER_INFERENCE_URL": "",
            "COBALT_TRAINER_CHECKPOINT_DIR": str(tmp_path / "checkpoints"),
            "COBALT_TRAINER_POLL_INTERVAL_S": "0.05",
        }
        serve = [str(TRAINER_PYTHON), "-m", "cobalt.trainer", "serve", "--job", str(job_id)]
        done = subprocess.run(serve, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        job = api.get(f"/v1/training/jobs/{job_id}").json()
        past = api.post(f"/v1/training/jobs/{job_id}/rounds/3")
        resume = api.post(f"/v1/training/jobs/{job_id}/resume")
        again = subprocess.run(serve, env=env, capture_output=True, text=True, timeout=600)
    assert (job["status"], job["step"], job["step_budget"], job["liveness"]) == (
        "finished", 2, 2, "ended",
    )  # fmt: skip
    assert [s["step"] for s in job["steps"]] == [1, 2]
    ledger = consumed(sessions, job_id)
    # Exactly the budget's groups, each trained on once. With rounds run ahead, a step
    # takes whichever ready group came first, so the step of round 1 may be 2.
    assert [round for _, _, round, _ in ledger] == [1, 2]
    assert sorted(step or 0 for step, _, _, _ in ledger) == [1, 2]
    assert {status for _, _, _, status in ledger} == {"consumed"}
    if "epochs" in budget:  # the epoch visited each context once
        assert len({key for _, key, _, _ in ledger}) == 2
    assert past.status_code == 409 and "has finished" in past.json()["error"]["message"]
    assert resume.status_code == 409 and "nothing is left to do" in resume.text
    # A trainer started again for the finished job has nothing to do.
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing left to do" in again.stderr + again.stdout
    assert (tmp_path / "checkpoints" / f"job-{job_id}" / "step-2").is_dir()
    listed = cobalt(cli_env, "train", "list")
    assert "finished" in listed.stdout and "(stale)" not in listed.stdout
