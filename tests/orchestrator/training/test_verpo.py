"""VeRPO training groups (`verpo` mode): the multi-turn episodes against the deterministic
OpenAI test server and the real executor, every turn scored by VeRPO with weights from
the group, each episode by the mean of its turns, and what `cobalt train start` accepts.

The problem: read n, print 2n; public tests 2 -> 4, 3 -> 6, hidden 5 -> 10, 0 -> 0. The
scripted model at turn 0: choice 0 squares n (passes 2 -> 4 and 0 -> 0), choice 1 is
right, choice 2 prints 0 (passes 0 -> 0 only). After feedback the square becomes right
and the zero stays zero. With `stop_on_pass` and 2 turns the group executes five
programs:

    e0: square [1,0,0,1], right [1,1,1,1]   e1: right [1,1,1,1]   e2: zero [0,0,0,1] twice

rho = [3/5, 2/5, 2/5, 1], weights [1/4, 3/8, 3/8, 0] (0 -> 0 is passed by all: it weighs
nothing). Turn rewards (alpha 0.5): square 1/8, right 1, zero 0. Episodes: e0 = (1/8 +
1) / 2 = 9/16, e1 = 1, e2 = 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.models import TrainingGroup, TrainingJob
from cobalt.orchestrator.training import service
from cobalt.shared.clients import ExecutorAddress
from cobalt.shared.contracts.training import StepClaim, TrainingJobCreate, TrainingMode
from cobalt.shared.errors import InvalidInput
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.runs import cobalt, json_out
from tests.support.training import RIGHT, bandit_dataset, roll_out_round

SQUARE = "<think>Square it.</think>\n```python\nn = int(input())\nprint(n * n)\n```\n"
ZERO = "<think>Zero.</think>\n```python\nprint(0)\n```\n"


def partly_right(messages: list[dict[str, Any]], index: int) -> str:
    if len(messages) == 1:
        return [SQUARE, RIGHT, ZERO][index % 3]
    return RIGHT if "n * n" in messages[-2]["content"] else ZERO


def start_verpo_job(
    sessions: sessionmaker[Session], url: str, policy_dir: Path, **params: Any
) -> int:
    bandit_dataset(sessions)
    request = TrainingJobCreate(
        name="verpo",
        contexts="ctx",
        model=str(policy_dir),
        mode=TrainingMode.VERPO,
        params={"base_url": url, "served_model": "fake-model", "template": "default",
                "turns": 2, "trainer": {"n_samples": 3, "contexts_per_step": 1,
                                        "updates_per_step": 1},
                **params},
    )  # fmt: skip
    return service.create_job(sessions, request)


def test_every_turn_is_scored_by_verpo_and_each_episode_by_its_turns_mean(
    sessions: sessionmaker[Session], store_url: str, executor_url: str, policy_dir: Path
) -> None:
    fake = FakeOpenAI(responder=partly_right)
    with serve_fake_openai(fake) as url:
        job_id = start_verpo_job(sessions, url, policy_dir)
        settings = OrchestratorSettings(database_url=store_url, redis_url=None)
        context_ids = roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor_url))

    assert len(context_ids) == 1  # the turn-0 context only, as in multi-turn
    assert [request["n"] for request in fake.requests] == [3, 1, 1]  # e1 passed at turn 0
    with sessions() as session:
        group = session.scalars(select(TrainingGroup)).one()
        rows = {(s.sample_index, s.turn): s for s in group.samples}
        assert sorted(rows) == [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1)]
        # Every turn ran on every test, public then hidden.
        assert rows[0, 0].verdicts == ["accepted", "wrong_answer", "wrong_answer", "accepted"]
        assert rows[0, 1].verdicts == ["accepted"] * 4
        assert rows[2, 0].verdicts == ["wrong_answer"] * 3 + ["accepted"]
        assert [rows[0, t].total for t in (0, 1)] == pytest.approx([9 / 16, 9 / 16])
        assert rows[1, 0].total == 1.0
        assert {rows[2, t].total for t in (0, 1)} == {0.0}
        # The episode's last turn gives the outcome and pass rate columns.
        assert (rows[0, 0].validation_reward, rows[0, 0].pass_rate) == (1.0, 1.0)
        assert (rows[2, 1].validation_reward, rows[2, 1].pass_rate) == (0.0, 0.25)
        assert rows[2, 1].correctness is None  # no Cobalt tiers in this mode

    claimed = service.claim_step(
        sessions, job_id, 1, StepClaim(groups=1, current_version=7, max_staleness=0)
    )
    samples = claimed.groups[0].samples
    assert [s.reward for s in samples] == pytest.approx([9 / 16, 9 / 16, 1.0, 0.0, 0.0])


def test_the_outcome_weight_is_the_jobs(
    sessions: sessionmaker[Session], store_url: str, executor_url: str, policy_dir: Path
) -> None:
    # alpha = 0: the dense reward alone. Square 1/4, right 1: e0 = (1/4 + 1) / 2 = 5/8.
    fake = FakeOpenAI(responder=partly_right)
    with serve_fake_openai(fake) as url:
        job_id = start_verpo_job(sessions, url, policy_dir, verpo_outcome_weight=0.0)
        settings = OrchestratorSettings(database_url=store_url, redis_url=None)
        roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor_url))
    with sessions() as session:
        group = session.scalars(select(TrainingGroup)).one()
        totals = {s.sample_index: s.total for s in group.samples}
        assert totals == {0: pytest.approx(5 / 8), 1: 1.0, 2: 0.0}


def test_settings_that_mean_nothing_in_a_mode_are_refused(
    sessions: sessionmaker[Session], policy_dir: Path
) -> None:
    bandit_dataset(sessions)

    def create(mode: TrainingMode, **params: Any) -> None:
        trainer = {"contexts_per_step": 1, "updates_per_step": 1}
        service.create_job(
            sessions,
            TrainingJobCreate(name=f"job-{mode}", contexts="ctx", model=str(policy_dir),
                              mode=mode, params={"trainer": trainer, **params}),
        )  # fmt: skip

    with pytest.raises(InvalidInput, match="verpo_outcome_weight: a VeRPO setting"):
        create(TrainingMode.MULTI_TURN, verpo_outcome_weight=0.3)
    with pytest.raises(InvalidInput, match="reward_format: the VeRPO reward reads only"):
        create(TrainingMode.VERPO, reward_format="instruct")
    with pytest.raises(InvalidInput, match="verpo_outcome_weight"):
        create(TrainingMode.VERPO, verpo_outcome_weight=1.5)
    with sessions() as session:
        assert session.scalars(select(TrainingJob)).all() == []


def test_cobalt_train_start_mode_verpo(
    cli_env: dict[str, str], sessions: sessionmaker[Session], policy_dir: Path
) -> None:
    bandit_dataset(sessions)
    started = json_out(
        cobalt(
            cli_env, "train", "start", "--contexts", "ctx", "--model", str(policy_dir),
            "--mode", "verpo", "--contexts-per-step", "1", "--updates-per-step", "1",
            "--turns", "2", "--verpo-outcome-weight", "0.25", "--json",
        )
    )  # fmt: skip
    assert started["mode"] == "verpo"
    assert (started["params"]["turns"], started["params"]["verpo_outcome_weight"]) == (2, 0.25)
