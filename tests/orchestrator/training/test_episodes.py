"""Multi-turn training groups (`multi-turn` mode): online episodes with execution feedback,
rolled out against the deterministic OpenAI test server and the real executor, and the
ledger rows the trainer then claims (one per assistant turn, the episode's reward on each).

The scripted "model": at turn 0 choice 0 is wrong (n + 1), choice 1 right, choice 2 has no
code; after seeing its wrong program's feedback it answers right, after no code it again
writes no code. The problem has 2 public and 2 hidden tests.
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
from tests.support.training import NO_CODE, RIGHT, WRONG, bandit_dataset, roll_out_round


def learns_from_feedback(messages: list[dict[str, Any]], index: int) -> str:
    if len(messages) == 1:
        return [WRONG, RIGHT, NO_CODE][index % 3]
    previous_answer = messages[-2]["content"]
    return RIGHT if "int(input()) + 1" in previous_answer else NO_CODE


def start_multi_turn_job(
    sessions: sessionmaker[Session], url: str, policy_dir: Path, **params: Any
) -> int:
    bandit_dataset(sessions)
    request = TrainingJobCreate(
        name="episodes",
        contexts="ctx",
        model=str(policy_dir),
        mode=TrainingMode.MULTI_TURN,
        params={"base_url": url, "served_model": "fake-model",
                "trainer": {"n_samples": 3, "contexts_per_step": 1, "updates_per_step": 1},
                **params},
    )  # fmt: skip
    return service.create_job(sessions, request)


def test_episodes_run_with_feedback_and_every_turn_carries_the_episode_reward(
    sessions: sessionmaker[Session], store_url: str, executor_url: str, policy_dir: Path
) -> None:
    fake = FakeOpenAI(responder=learns_from_feedback)
    with serve_fake_openai(fake) as url:
        job_id = start_multi_turn_job(sessions, url, policy_dir, template="default", turns=3)
        settings = OrchestratorSettings(database_url=store_url, redis_url=None)
        context_ids = roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor_url))

    assert len(context_ids) == 1  # multi-turn trains on the turn-0 context only
    # Turn 0: one request with 3 choices; turn 1: episodes 0 and 2 (episode 1 passed);
    # turn 2: episode 2 only (episode 0 passed at turn 1).
    assert [request["n"] for request in fake.requests] == [3, 1, 1, 1]
    turn_one = [r["messages"] for r in fake.requests[1:3]]
    wrong_followup = next(m for m in turn_one if "int(input()) + 1" in m[1]["content"])
    assert [m["role"] for m in wrong_followup] == ["user", "assistant", "user"]
    assert "<think>" not in wrong_followup[1]["content"]  # the history drops the thinking
    assert "4" in wrong_followup[2]["content"]  # the first failing public test is shown

    with sessions() as session:
        group = session.scalars(select(TrainingGroup)).one()
        rows = {(s.sample_index, s.turn): s for s in group.samples}
        assert sorted(rows) == [(0, 0), (0, 1), (1, 0), (2, 0), (2, 1), (2, 2)]
        assert group.policy_version == 7
        assert set(group.phase_seconds) == {"generate", "execute", "score"}
        # Episode 0: wrong, then right on all 4 tests; its reward is its last turn's (b = 0).
        assert rows[0, 0].response == WRONG and rows[0, 1].response == RIGHT
        assert rows[0, 0].verdicts == ["wrong_answer", "wrong_answer"]  # public only
        assert rows[0, 1].verdicts == ["accepted"] * 4  # last turn: public and hidden
        assert rows[0, 0].total == rows[0, 1].total == 1.0
        assert rows[0, 0].pass_rate == 1.0 and rows[0, 0].prev_best == 0.0
        # Each turn keeps the prompt and ids it was sampled with: turn 1's prompt is longer.
        assert len(rows[0, 1].prompt_token_ids) > len(rows[0, 0].prompt_token_ids)
        assert rows[0, 1].response_token_ids == [ord(ch) for ch in RIGHT]
        assert rows[1, 0].total == 1.0
        # Episode 2 never writes code: three turns, all with the no-code reward.
        assert {rows[2, t].total for t in range(3)} == {-1.0}
        assert rows[2, 2].no_code

    claimed = service.claim_step(
        sessions, job_id, 1, StepClaim(groups=1, current_version=7, max_staleness=0)
    )
    samples = claimed.groups[0].samples
    assert [(s.sample_index, s.turn) for s in samples] == sorted(rows)
    assert [s.reward for s in samples] == [1.0, 1.0, 1.0, -1.0, -1.0, -1.0]


def test_stop_on_pass_off_runs_every_episode_for_all_turns(
    sessions: sessionmaker[Session], store_url: str, executor_url: str, policy_dir: Path
) -> None:
    fake = FakeOpenAI(responder=learns_from_feedback)
    with serve_fake_openai(fake) as url:
        job_id = start_multi_turn_job(
            sessions, url, policy_dir, template="default", turns=2, stop_on_pass=False
        )
        roll_out_round(
            OrchestratorSettings(database_url=store_url, redis_url=None),
            job_id,
            1,
            executor=ExecutorAddress(executor_url),
        )
    with sessions() as session:
        group = session.scalars(select(TrainingGroup)).one()
        assert sorted((s.sample_index, s.turn) for s in group.samples) == [
            (0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1),
        ]  # fmt: skip
        # Episode 1 was right, then (no wrong program to fix) wrote no code: its last turn
        # decides, so the episode is rewarded -1 although it had solved the problem.
        assert {s.total for s in group.samples if s.sample_index == 1} == {-1.0}


def test_a_changed_source_template_fails_the_round_with_its_reason(
    sessions: sessionmaker[Session],
    store_url: str,
    executor_url: str,
    model: tuple[FakeOpenAI, str],
    policy_dir: Path,
) -> None:
    # The fixture's contexts record a template hash that is not the bundled file's.
    _, url = model
    job_id = start_multi_turn_job(sessions, url, policy_dir)
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    with pytest.raises(InvalidInput, match="template 'default' changed since bandit context"):
        roll_out_round(settings, job_id, 1, executor=ExecutorAddress(executor_url))
    with sessions() as session:
        assert session.scalars(select(TrainingGroup)).all() == []


def test_multi_turn_settings_are_refused_in_other_modes(
    sessions: sessionmaker[Session], policy_dir: Path
) -> None:
    bandit_dataset(sessions)
    request = TrainingJobCreate(
        name="cobalt", contexts="ctx", model=str(policy_dir), params={"turns": 4}
    )
    with pytest.raises(InvalidInput, match="turns: multi-turn settings, but the job's mode is"):
        service.create_job(sessions, request)
    bad_template = TrainingJobCreate(
        name="mt", contexts="ctx", model=str(policy_dir), mode=TrainingMode.MULTI_TURN,
        params={"template": "no-such-template",
                "trainer": {"contexts_per_step": 1, "updates_per_step": 1}},
    )  # fmt: skip
    with pytest.raises(InvalidInput, match="no-such-template"):
        service.create_job(sessions, bad_template)
    with sessions() as session:
        assert session.scalars(select(TrainingJob)).all() == []
