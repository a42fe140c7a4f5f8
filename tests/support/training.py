"""Training tests' scripted answers, their bandit dataset, a job over it, its ledger groups
and the trainer's interpreter.

The scripted model answers choice 0 wrong (n + 1), choice 1 right (2n), choice 2 with no
code; the problem has 2 public and 2 hidden tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.bandit.builder import BuildOptions
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store import repo_bandit, repo_datasets, repo_runs
from cobalt.orchestrator.store.models import Problem, TrainingGroup
from cobalt.orchestrator.store.repo_bandit import ContextRow
from cobalt.orchestrator.training import service
from cobalt.orchestrator.worker.carrier import ThreadCarrier, queue_carrier
from cobalt.orchestrator.worker.carrier_base import Carrier
from cobalt.orchestrator.worker.carry_out import schedule_round
from cobalt.orchestrator.worker.queue import QUEUE_NAME
from cobalt.orchestrator.worker.runtime import (
    JobContext,
    install_job_context,
    job_context,
    sessions_for,
)
from cobalt.shared.clients import ExecutorAddress
from cobalt.shared.contracts.runs import RunParams
from cobalt.shared.contracts.training import TrainingJobCreate

RIGHT = "<think>Double it.</think>\n```python\nprint(2 * int(input()))\n```\n"
WRONG = "<think>Add one, but verify.</think>\n```python\nprint(int(input()) + 1)\n```\n"
NO_CODE = "I do not know."

TRAINER_PYTHON = Path(__file__).resolve().parents[2] / ".venv-trainer" / "bin" / "python"
"""The trainer's interpreter (torch + verl), made by `make setup`."""


def answer(messages: list[dict[str, Any]], index: int) -> str:
    """Choice 0 wrong, 1 right, 2 without code, whatever the turn."""
    return [WRONG, RIGHT, NO_CODE][index % 3]


def flat_after_feedback(messages: list[dict[str, Any]], index: int) -> str:
    """Every choice right on the context after a first turn (a group with no reward
    variance), as `answer` on the problem alone."""
    if any(message["role"] == "assistant" for message in messages):
        return RIGHT
    return answer(messages, index)


def bandit_dataset(sessions: sessionmaker[Session]) -> str:
    """Two contexts of one problem: the turn-0 context and one after a wrong first turn."""
    public = [{"stdin": "2", "expected_stdout": "4"}, {"stdin": "3", "expected_stdout": "6"}]
    hidden = [{"stdin": "5", "expected_stdout": "10"}, {"stdin": "0", "expected_stdout": "0"}]
    prompt = [{"role": "user", "content": "Read n, print 2n."}]
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="doubles", source="jsonl")
        repo_datasets.insert_problems(
            session,
            dataset_id=dataset.id,
            rows=[{"external_id": "double", "statement": "Read n, print 2n.",
                   "test_style": "stdin", "public_tests": public, "hidden_tests": hidden}],
        )  # fmt: skip
        problem_id = session.scalars(select(Problem.id)).one()
        run = repo_runs.create_run(
            session, kind="sample", dataset_id=dataset.id, base_url="http://x/v1", model="m",
            params=RunParams(n=1, turns=2), template_name="default", template_sha256="ab" * 32,
            total_trajectories=1,
        )  # fmt: skip
        later = [*prompt, {"role": "assistant", "content": WRONG}, {"role": "user", "content": "3"}]
        repo_bandit.create_bandit_dataset(
            session, name="ctx", source_run_id=run.id, split="train",
            params=BuildOptions().as_params(), counts={},
            contexts=[
                ContextRow(problem_id=problem_id, source_run_id=run.id, trajectory_id=None,
                           assistant_turns=turns, messages=messages, prev_best=best,
                           prompt_tokens=10, template_sha256="ab" * 32)
                for turns, messages, best in ((0, prompt, 0.0), (1, later, 0.25))
            ],
        )  # fmt: skip
    return "ctx"


def start_job(
    sessions: sessionmaker[Session],
    url: str,
    policy_dir: Path,
    rollout: dict[str, Any] | None = None,
    **params: Any,
) -> int:
    """A job over the test bandit dataset; `params` are the trainer's, `rollout` the job's."""
    bandit_dataset(sessions)
    request = TrainingJobCreate(
        name="job",
        contexts="ctx",
        model=str(policy_dir),
        params={"base_url": url, "served_model": "fake-model", **(rollout or {}),
                "trainer": {"n_samples": 3, "contexts_per_step": 2, **params}},
    )  # fmt: skip
    return service.create_job(sessions, request)


def consumed_groups(sessions: sessionmaker[Session], job_id: int) -> list[TrainingGroup]:
    """The groups job `job_id`'s steps trained on, in step order, their samples loaded."""
    with sessions() as session:
        found = session.scalars(
            select(TrainingGroup)
            .where(TrainingGroup.job_id == job_id, TrainingGroup.status == "consumed")
            .order_by(TrainingGroup.step)
        ).all()
        for group in found:
            group.samples  # load them before the session closes  # noqa: B018
        return list(found)


def groups(sessions: sessionmaker[Session]) -> list[TrainingGroup]:
    with sessions() as session:
        found = session.scalars(select(TrainingGroup).order_by(TrainingGroup.id)).all()
        for group in found:
            group.samples  # load them before the session closes  # noqa: B018
        return list(found)


def roll_out_round(settings: OrchestratorSettings, job_id: int, round: int, *,
                   executor: ExecutorAddress | None = None,
                   carrier: Carrier | None = None) -> list[int]:  # fmt: skip
    """`schedule_round` on `carrier`, by default the thread carrier on `executor`."""
    if carrier is None:
        assert executor is not None
        carrier = ThreadCarrier(settings, executor)
    return schedule_round(carrier, sessions_for(settings.database_url), job_id, round)


def roll_out_queued(settings: OrchestratorSettings, job_id: int, round: int, *,
                    executor: ExecutorAddress) -> list[int]:  # fmt: skip
    """`schedule_round` on the queue carrier (`settings.redis_url`'s queue), then an RQ
    worker of this process takes every job until the queue is empty, refills included."""
    carrier = queue_carrier(settings)
    assert carrier is not None
    context_ids = roll_out_round(settings, job_id, round, carrier=carrier)
    work_the_queue(settings, executor)
    return context_ids


def work_the_queue(settings: OrchestratorSettings, executor: ExecutorAddress) -> None:
    """An RQ worker of this process takes every job of `settings`' queue until it is empty
    (what jobs queue meanwhile included), on `executor`."""
    from redis import Redis
    from rq import SimpleWorker

    carrier = queue_carrier(settings)
    assert carrier is not None
    previous = job_context()
    install_job_context(JobContext(settings, executor=executor))
    try:
        with Redis.from_url(carrier.redis_url) as connection:
            SimpleWorker([QUEUE_NAME], connection=connection).work(burst=True)
    finally:
        install_job_context(previous)
