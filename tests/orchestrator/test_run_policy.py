"""Provenance of weights on PostgreSQL and SQLite: a run records the weights its endpoint
reports serving when it starts (`runs.provenance`), `cobalt run show` names them, a
resume against other weights is refused, and a training job's detail lists each
checkpoint with the line that serves it and the runs evaluated with it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.runs import service
from cobalt.orchestrator.runs.provenance import ask_served_policy, record_served_policy
from cobalt.orchestrator.store import repo_datasets, repo_runs, repo_training
from cobalt.orchestrator.store.models import RunStatus
from cobalt.orchestrator.store.repo_policy import record_run_policy
from cobalt.orchestrator.training.service import job_public
from cobalt.shared.contracts.hyperparameters import TrainingMode
from cobalt.shared.contracts.runs import RunParams
from cobalt.shared.contracts.training_params import training_params
from cobalt.shared.contracts.weights import WeightsIdentity
from cobalt.shared.errors import Conflict
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.cli import cobalt_here
from tests.support.runs import add_doubles, cobalt, json_out, run_sample, scripted

STEP_2 = {"kind": "full", "path": "/ckpt/job-3/step-2/policy", "digest": "d2" * 32,
          "job": 3, "step": 2, "version": 5}  # fmt: skip


@pytest.fixture
def served() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI(responder=scripted, weights=dict(STEP_2))
    with serve_fake_openai(fake) as url:
        yield fake, url


def new_run(sessions: sessionmaker[Session], base_url: str) -> int:
    with sessions.begin() as session:
        dataset = repo_datasets.get_dataset(session, name="toy") or repo_datasets.create_dataset(
            session, name="toy", source="jsonl"
        )
        run = repo_runs.create_run(
            session, kind="sample", dataset_id=dataset.id, base_url=base_url, model="fake-model",
            params=RunParams(n=1, turns=1), template_name="default", template_sha256="ab" * 32,
            total_trajectories=0,
        )  # fmt: skip
        return run.id


def start(sessions: sessionmaker[Session], run_id: int) -> None:
    """What a run's first job does (`runs.jobs.roll_out_run_problem`)."""
    with sessions.begin() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        served = ask_served_policy(run, None)
        run = repo_runs.get_run(session, run_id=run_id, lock=True)
        record_served_policy(session, run, served)


def test_a_run_records_the_weights_it_started_with_and_show_names_them(
    sessions: sessionmaker[Session], served: tuple[FakeOpenAI, str], store_url: str
) -> None:
    fake, url = served
    run_id = new_run(sessions, url)
    start(sessions, run_id)
    public = service.run_public(sessions, run_id)
    assert public.policy == WeightsIdentity.model_validate(STEP_2)
    shown = cobalt_here({"COBALT_DATABASE_URL": store_url, "COLUMNS": "200"}, "run", "show",
                        str(run_id))  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    policy_row = next(line for line in shown.stdout.splitlines() if "policy" in line)
    assert "job 3 step 2, version 5 at /ckpt/job-3/step-2/policy (digest d2d2d2d2d2d2)" in (
        policy_row
    )
    # Resumed (pending again) against the same weights served as another version: fine.
    fake.weights = STEP_2 | {"version": 0}
    start(sessions, run_id)
    # Against other weights: refused, naming both.
    fake.weights = STEP_2 | {"digest": "e3" * 32, "step": 3}
    with pytest.raises(Conflict, match=r"started with job 3 step 2.*now serves job 3 step 3"):
        start(sessions, run_id)
    assert service.run_public(sessions, run_id).policy.digest == "d2" * 32  # type: ignore[union-attr]


def test_an_endpoint_that_does_not_report_its_weights_leaves_the_run_without_policy(
    sessions: sessionmaker[Session], served: tuple[FakeOpenAI, str], store_url: str
) -> None:
    fake, url = served
    fake.weights = None  # an older server, or another OpenAI-compatible one
    run_id = new_run(sessions, url)
    start(sessions, run_id)
    assert service.run_public(sessions, run_id).policy is None
    shown = cobalt_here({"COBALT_DATABASE_URL": store_url, "COLUMNS": "200"}, "run", "show",
                        str(run_id))  # fmt: skip
    assert "not reported (the endpoint is not Cobalt's inference service)" in shown.stdout
    # Nothing answers at all: not reported either, and a running run does not ask.
    nowhere = new_run(sessions, "http://127.0.0.1:9/v1")
    start(sessions, nowhere)
    assert service.run_public(sessions, nowhere).policy is None
    with sessions() as session:
        run = repo_runs.get_run(session, run_id=run_id)
        run.status = RunStatus.RUNNING
        fake.weights = dict(STEP_2)
        assert ask_served_policy(run, None) is None


def test_a_job_lists_its_checkpoints_the_serve_line_and_the_runs_evaluated_with_each(
    sessions: sessionmaker[Session], tmp_path: Path, cli_env: dict[str, str]
) -> None:
    with sessions.begin() as session:
        job = repo_training.create_job(
            session, name="j", model="m", bandit_dataset_id=None,
            params=training_params(TrainingMode.COBALT, {}),
        )  # fmt: skip
    kept = tmp_path / "job-1" / "step-1" / "policy"
    kept.mkdir(parents=True)
    step_1 = WeightsIdentity(kind="full", path=str(kept), digest="a1" * 32, job=job.id, step=1,
                             version=1)  # fmt: skip
    step_2 = WeightsIdentity(kind="delta", path="/gone/step-2/policy", digest="b2" * 32,
                             job=job.id, step=2, version=2)  # fmt: skip
    runs = [new_run(sessions, "http://x/v1") for _ in range(3)]
    with sessions.begin() as session:
        for step, weights in ((1, step_1), (2, step_2), (3, None)):
            repo_training.record_step(
                session, job_id=job.id, step=step, policy_version=step, metrics={},
                checkpoint=weights.model_dump(mode="json") if weights else None,
            )  # fmt: skip
        record_run_policy(session, run_id=runs[0], policy=step_1)
        record_run_policy(session, run_id=runs[1], policy=step_2)
        # Another job's step 1: not this job's checkpoint.
        record_run_policy(session, run_id=runs[2], policy=step_1.model_copy(update={"job": 99}))
    listed = job_public(sessions, job.id).checkpoints
    assert [c.step for c in listed] == [3, 2, 1]
    three, two, one = listed
    assert one.runs == [runs[0]] and one.present
    assert one.serve_command == f"cobalt inference serve --model {kept} --served-name j-step-1"
    assert two.runs == [runs[1]] and not two.present and two.serve_command is None
    assert three.weights is None and three.runs == [] and three.serve_command is None
    shown = cobalt_here({**cli_env, "COLUMNS": "250"}, "train", "show", str(job.id))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert any(str(kept) in line and str(runs[0]) in line for line in lines), shown.stdout
    assert any("(not on this machine)" in line and str(runs[1]) in line for line in lines)
    assert f"serve step 1: {one.serve_command}" in lines


def test_a_sampled_run_records_its_policy_end_to_end(
    sessions: sessionmaker[Session],
    fake_model: tuple[FakeOpenAI, str],
    cli_env: dict[str, str],
) -> None:
    """The path every run takes (`cobalt run sample`, its jobs in this process)."""
    fake, url = fake_model
    fake.weights = dict(STEP_2)
    dataset = add_doubles(sessions)
    done = json_out(run_sample(cli_env, dataset, url, "fake-model", "--n", "1", "--json"))
    shown = json_out(cobalt(cli_env, "run", "show", str(done["run_id"]), "--json"))
    assert shown["status"] == "finished" and shown["policy"] == STEP_2
