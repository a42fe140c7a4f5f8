"""The training ledger (store/repo_training.py) on PostgreSQL and SQLite: groups written
once, steps claimed exactly once and identically on every re-claim, stale groups dropped."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_datasets, repo_training
from cobalt.orchestrator.store.models import Problem, TrainingGroup, TrainingSample
from cobalt.shared.contracts.training_params import CobaltParams
from cobalt.shared.errors import Conflict, InvalidInput
from tests.support.ledger import ledger_sample as sample


@pytest.fixture
def job(sessions: sessionmaker[Session]) -> tuple[int, int]:
    """A job and a problem to hang groups on."""
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="toy", source="jsonl")
        repo_datasets.insert_problems(
            session,
            dataset_id=dataset.id,
            rows=[{"external_id": "p", "statement": "s", "test_style": "stdin"}],
        )
        problem_id = session.scalars(select(Problem.id)).one()
        created = repo_training.create_job(
            session, name="j", model="m", bandit_dataset_id=None, params=CobaltParams()
        )
        return created.id, problem_id


def record(
    sessions: sessionmaker[Session], job: tuple[int, int], key: str, version: int = 0
) -> int | None:
    with sessions.begin() as session:
        return repo_training.record_group(
            session,
            job_id=job[0],
            context_key=key,
            round=1,
            problem_id=job[1],
            policy_version=version,
            samples=[sample(0, 1), sample(1, 4)],
        )


def never(version: int) -> bool:
    return False


def claim(
    sessions: sessionmaker[Session],
    job: tuple[int, int],
    step: int,
    groups: int = 2,
    *,
    stale: Callable[[int], bool] = never,
) -> repo_training.ClaimedStep | None:
    """Claim as a trainer would; `stale`: which sampled versions the off-policy rule
    (`training.staleness`, tested on its own) calls too old at the claim."""
    with sessions.begin() as session:
        claimed = repo_training.claim_step(
            session, job_id=job[0], step=step, groups=groups, stale=stale
        )
        if claimed is not None:  # read what the trainer reads, inside the transaction
            for group in claimed.groups:
                assert len(group.samples) == 2
        return claimed


def keys(claimed: repo_training.ClaimedStep | None) -> list[str]:
    assert claimed is not None
    return [group.context_key for group in claimed.groups]


def test_a_group_is_written_once_with_every_component(
    sessions: sessionmaker[Session], job: tuple[int, int]
) -> None:
    first = record(sessions, job, "bandit:1")
    assert first is not None
    assert record(sessions, job, "bandit:1") is None  # a retried rollout job
    with sessions() as session:
        rows = session.scalars(select(TrainingSample).order_by(TrainingSample.sample_index)).all()
    assert len(rows) == 2 and rows[1].response_token_ids == [4, 5, 1]
    assert rows[1].response_logprobs == [-0.5, -0.25, -1.0]
    assert rows[1].total == 1.0 and rows[0].pass_rate == 0.25
    assert rows[0].improvement_rule == "replaced" and rows[0].think_tokens == 2


def test_a_group_needs_two_distinct_samples_and_jobs_unique_names(
    sessions: sessionmaker[Session], job: tuple[int, int]
) -> None:
    with pytest.raises(InvalidInput, match="two or more"), sessions.begin() as session:
        repo_training.record_group(
            session, job_id=job[0], context_key="k", round=1, problem_id=job[1],
            policy_version=0, samples=[sample(0, 1)],
        )  # fmt: skip
    with pytest.raises(Conflict, match="named 'j'"), sessions.begin() as session:
        repo_training.create_job(
            session, name="j", model="m", bandit_dataset_id=None, params=CobaltParams()
        )


def test_a_step_is_the_same_groups_every_time_it_is_claimed(
    sessions: sessionmaker[Session], job: tuple[int, int]
) -> None:
    for key in ("a", "b", "c"):
        record(sessions, job, key)
    assert keys(claim(sessions, job, 1)) == ["a", "b"]
    assert keys(claim(sessions, job, 1)) == ["a", "b"]  # a resumed trainer asks again
    with pytest.raises(InvalidInput, match="claim 2 next"):
        claim(sessions, job, 3)
    assert claim(sessions, job, 2) is None  # one ready group is not a step of two
    record(sessions, job, "d")
    assert keys(claim(sessions, job, 2)) == ["c", "d"]
    with pytest.raises(InvalidInput, match="holds 2 groups, not 3"):
        claim(sessions, job, 2, groups=3)
    with sessions() as session:
        assert repo_training.group_counts(session, job_id=job[0]) == {
            "ready": 0,
            "consumed": 4,
            "stale": 0,
            "dropped": 0,
        }


def test_groups_too_many_versions_behind_are_dropped_and_counted_never_trained(
    sessions: sessionmaker[Session], job: tuple[int, int]
) -> None:
    record(sessions, job, "old", version=0)
    record(sessions, job, "recent", version=1)
    record(sessions, job, "new", version=2)
    claimed = claim(sessions, job, 1, groups=2, stale=lambda version: version < 1)
    assert keys(claimed) == ["recent", "new"]
    assert claimed is not None and claimed.stale == 1
    record(sessions, job, "newer", version=2)
    assert claim(sessions, job, 2, groups=2, stale=lambda version: version < 2) is None
    with sessions() as session:
        rows = session.execute(select(TrainingGroup.context_key, TrainingGroup.status))
        statuses = {key: status for key, status in rows}
    assert statuses == {"old": "stale", "recent": "consumed", "new": "consumed", "newer": "ready"}


def test_kill_and_resume_trains_every_sample_exactly_once(
    sessions: sessionmaker[Session], job: tuple[int, int]
) -> None:
    """A trainer that dies after claiming a step (before its checkpoint) and resumes gets
    the same groups; over the run each recorded group is trained on exactly once."""
    for key in "abcdef":
        record(sessions, job, key)
    trained: list[str] = []
    trained += keys(claim(sessions, job, 1))
    claim(sessions, job, 2)  # killed here: step 2 was claimed but never trained
    trained += keys(claim(sessions, job, 2))  # resumed from the step-1 checkpoint
    trained += keys(claim(sessions, job, 3))
    assert sorted(trained) == list("abcdef")
