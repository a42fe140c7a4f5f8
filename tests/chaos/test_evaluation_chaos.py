"""One multi-turn sample run (an evaluation run: several problems x samples, feedback
turns after turn 0) driven through a sequence of faults, one kind after another (or, with
COBALT_CHAOS_FAULTS=N and COBALT_CHAOS_SEED=S, N faults drawn from seed S), each landing
while the run is in flight, and its end state checked: the run finished, every trajectory
has all its turns, no (trajectory, turn) twice, each turn's answer, public and hidden
verdicts and the evaluation's Pass@1 and pass@k are those the fault-free run has, and
every process the test started is gone. docs/deploy.md ("When a part fails mid-job")
says what each fault does to a deployment.

The parts are those of tests/support/chaos.py's `chaos_deployment`: `cobalt orchestrator
serve`, two `cobalt worker` processes and `cobalt executor serve`, on a private Redis and
the session's PostgreSQL behind a TCP fault proxy, the executor and the model behind HTTP
fault proxies. The model is the deterministic test server: what it answers is a function
of the problem, the sample and the turn (`answer`), so the fault-free result is known
without running it (`expected_kinds`). Each process's output goes to a file under the
test's tmp_path (logs/), shown when the run does not finish."""

from __future__ import annotations

import math
import os
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_datasets
from cobalt.orchestrator.store.models import Run, Trajectory, Turn
from cobalt.shared.contracts import ProblemRow, StdinTest
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.chaos import (
    SHARED_KINDS,
    FaultLog,
    chaos_deployment,
    fault_sequence,
    wait_until,
)
from tests.support.runs import NO_CODE, RIGHT, WRONG

pytestmark = pytest.mark.slow

FAULTS = int(os.environ.get("COBALT_CHAOS_FAULTS", "0"))
SEED = int(os.environ["COBALT_CHAOS_SEED"]) if "COBALT_CHAOS_SEED" in os.environ else None
EXECUTOR_TIMEOUT_S = 3
"""The workers' executor client timeout: a judgement takes well under a second here, and
executor-stall stops the executor for 2 s longer than this."""
RECOVERY_INTERVAL_S = 1
"""COBALT_RUN_RECOVERY_INTERVAL_S: a lost job is queued again within a few of these."""
PROGRESS_TIMEOUT_S = 120
"""Longest wait for the next turn after a fault (a job retried after RQ's 10 s, a lost
job found and queued again)."""
SAMPLES = 2
FEEDBACK_TURNS = 2
PROBLEMS_PER_FAULT = 3
"""A fault and the turns after it take 2-3 s, while the two workers finish about a
problem a second between them: with this many problems a fault (and 10 more), every fault
lands while the run is in flight, which the test checks."""
ANSWERS = (WRONG, RIGHT, NO_CODE)


def answer(messages: list[dict[str, Any]], index: int) -> str:
    """Turn 0 of sample s of problem p: ANSWERS[(p + s) % 3]; each later turn the next
    answer in ANSWERS after the previous one (so every problem gets feedback turns, some
    samples pass at some turns and not others)."""
    statement = next(m["content"] for m in messages if m["role"] == "user")
    problem = int(re.search(r"Problem (\d+):", statement)[1])  # type: ignore[index]
    previous = [m["content"] for m in messages if m["role"] == "assistant"]
    if not previous:
        return ANSWERS[(problem + index) % 3]
    return ANSWERS[(_kind(previous[-1]) + 1) % 3]


def _kind(text: str) -> int:
    """Which of ANSWERS `text` is (as the history stores it: the thinking cut)."""
    if "2 * int" in text:
        return 1
    return 0 if "+ 1" in text else 2


def expected_kinds(problems: int) -> dict[tuple[int, int, int], int]:
    """The fault-free run's answer (an ANSWERS index) by (problem, sample, turn)."""
    return {
        (p, s, t): (p + s + t) % 3
        for p in range(problems)
        for s in range(SAMPLES)
        for t in range(FEEDBACK_TURNS + 1)
    }


def add_problems(sessions: sessionmaker[Session], count: int) -> str:
    """The dataset "chaos-doubles": `count` problems "Problem i: ... print 2*n"."""
    rows = [
        ProblemRow(
            external_id=f"problem-{i:03d}",
            statement=f"Problem {i}: read an integer n and print 2*n.",
            public_tests=[StdinTest(stdin="2", expected_stdout="4")],
            hidden_tests=[StdinTest(stdin="7", expected_stdout="14")],
        )
        for i in range(count)
    ]
    with sessions.begin() as session:
        created = repo_datasets.create_dataset(session, name="chaos-doubles", source="jsonl")
        repo_datasets.insert_problems(
            session, dataset_id=created.id, rows=[r.model_dump(mode="json") for r in rows]
        )
    return "chaos-doubles"


def test_an_evaluation_run_survives_each_fault_kind(
    database: str, store: sessionmaker[Session], tmp_path: Path
) -> None:
    faults = fault_sequence(SHARED_KINDS, FAULTS, SEED)
    problems = 10 + PROBLEMS_PER_FAULT * len(faults)
    dataset = add_problems(store, problems)
    log = FaultLog()
    fake = FakeOpenAI(responder=answer, delay_s=0.15)
    settings = {"COBALT_RUN_RECOVERY_INTERVAL_S": str(RECOVERY_INTERVAL_S)}
    with (
        serve_fake_openai(fake) as model_url,
        chaos_deployment(
            database, model_url, tmp_path, executor_timeout_s=EXECUTOR_TIMEOUT_S,
            settings=settings,
        ) as deployment,
        httpx.Client(base_url=deployment.url, timeout=60) as api,
    ):  # fmt: skip
        created = api.post(
            "/v1/runs",
            json={"dataset": dataset, "base_url": deployment.model_url, "model": "fake-model",
                  "n": SAMPLES, "turns": FEEDBACK_TURNS, "stop_on_pass": False},
        )  # fmt: skip
        assert created.status_code == 202, created.text
        run_id = created.json()["id"]
        total_turns = problems * SAMPLES * (FEEDBACK_TURNS + 1)

        def turns() -> int:
            with store() as session:
                return session.scalar(select(func.count(Turn.id)).where(Turn.run_id == run_id)) or 0

        def logs() -> str:
            return (deployment.logs / "workers.log").read_text()[-4000:]

        wait_until(lambda: turns() > 0, PROGRESS_TIMEOUT_S, "first turn")
        inject = deployment.faults(turns)
        for kind in faults:
            before = turns()
            assert before < total_turns, f"the run ended before {kind}: make it longer"
            injected = time.monotonic()
            inject[kind]()
            try:
                wait_until(lambda b=before: turns() > b, PROGRESS_TIMEOUT_S, f"turn after {kind}")
            except AssertionError as exc:
                raise AssertionError(logs()) from exc
            log.record(kind, time.monotonic() - injected)
        assert turns() < total_turns, "the last fault landed after the run: make it longer"

        def ended() -> bool:
            with store() as session:
                return session.get(Run, run_id).status not in ("pending", "running")  # type: ignore[union-attr]

        try:
            wait_until(ended, PROGRESS_TIMEOUT_S, "the run's end")
        except AssertionError as exc:
            raise AssertionError(logs()) from exc
        evaluated = api.post(f"/v1/runs/{run_id}/evaluate", params={"k": [1, 2]})
        assert evaluated.status_code == 200, evaluated.text
        report = evaluated.json()
    print(log.table())

    with store() as session:
        run = session.get(Run, run_id)
        assert run is not None and run.status == "finished", (run and run.error, logs())
        trajectories = session.scalars(select(Trajectory).where(Trajectory.run_id == run_id))
        assert sorted((t.status, t.turns_done) for t in trajectories) == [
            ("finished", FEEDBACK_TURNS + 1)
        ] * (problems * SAMPLES)
        twice = session.execute(
            select(Turn.trajectory_id, Turn.turn_index)
            .where(Turn.run_id == run_id)
            .group_by(Turn.trajectory_id, Turn.turn_index)
            .having(func.count() > 1)
        ).all()
        assert twice == []
        order = {
            pid: i for i, pid in enumerate(sorted({t.problem_id for t in session.scalars(
                select(Turn).where(Turn.run_id == run_id))}))
        }  # fmt: skip
        stored = session.scalars(select(Turn).where(Turn.run_id == run_id)).all()
        got = {(order[t.problem_id], t.sample_index, t.turn_index): t for t in stored}
    expected = expected_kinds(problems)
    assert sorted(got) == sorted(expected)
    for key, kind in expected.items():
        turn = got[key]
        assert turn.raw_response == ANSWERS[kind], key
        assert turn.public_passed == (ANSWERS[kind] == RIGHT), key
        hidden = bool(turn.hidden_verdicts) and set(turn.hidden_verdicts or []) == {"accepted"}
        assert hidden == (ANSWERS[kind] == RIGHT), key
    # The fault-free run's report: per turn, the share of each problem's samples that pass.
    passing = [
        [sum(expected[p, s, t] == 1 for s in range(SAMPLES)) for p in range(problems)]
        for t in range(FEEDBACK_TURNS + 1)
    ]
    assert report["failed_trajectories"] == 0 and report["sandbox_errors"] == 0
    assert report["pass_at_1"] == pytest.approx([sum(c) / SAMPLES / problems for c in passing])
    assert report["pass_at_k"]["2"] == pytest.approx(
        [sum(1 - math.comb(SAMPLES - c, 2) / math.comb(SAMPLES, 2) for c in turn) / problems
         for turn in passing]
    )  # fmt: skip
    assert all(process.poll() is not None for process in deployment.processes)
    assert deployment.redis.process is None or deployment.redis.process.poll() is not None
