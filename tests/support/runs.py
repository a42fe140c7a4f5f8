"""Rollout runs as tests drive them: the "doubles" dataset, a scripted model, the `cobalt`
CLI and workers as subprocesses, and the stored turns read back."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store import repo_datasets
from cobalt.orchestrator.store.models import Turn
from cobalt.shared.contracts import ExecuteResponse, ProblemRow, StdinTest, TestResult, Verdict
from tests.support.cli import Invoked

WRONG = "Here you go:\n```python\nprint(int(input()) + 1)\n```"
RIGHT = "<think>double it</think>\nFixed:\n```python\nprint(2 * int(input()))\n```"
NO_CODE = "I would multiply the number by two."

REDIS_URL = os.environ.get("COBALT_TEST_REDIS_URL", "redis://127.0.0.1:6379/13")
"""The Redis database the queue tests flush (COBALT_TEST_REDIS_URL: one per engineer)."""

TABLES = (
    "training_samples",
    "training_steps",
    "training_groups",
    "training_jobs",
    "judge_verdicts",
    "hacking_cases",
    "bandit_contexts",
    "bandit_datasets",
    "turn_rewards",
    "turns",
    "trajectories",
    "runs",
    "problems",
    "datasets",
)
"""Every table of the store, children first (the order they can be emptied in)."""

PROBLEMS = [
    ProblemRow(
        external_id=f"double-{i}",
        statement=f"Problem {i}: read an integer n and print 2*n. " * 3,
        public_tests=[
            StdinTest(stdin="2", expected_stdout="4"),
            StdinTest(stdin="5", expected_stdout="10"),
        ],
        hidden_tests=[
            StdinTest(stdin="7", expected_stdout="14"),
            StdinTest(stdin="100", expected_stdout="200"),
        ],
    )
    for i in range(2)
]


def scripted(messages: list[dict[str, Any]], index: int) -> str:
    """Turn 0: sample 0 wrong, sample 1 right, sample 2 no code. Later turns: right."""
    if sum(m["role"] == "assistant" for m in messages) == 0:
        return [WRONG, RIGHT, NO_CODE][index % 3]
    return RIGHT


def add_doubles(sessions: sessionmaker[Session]) -> str:
    """The two-problem dataset "doubles" in the store behind `sessions`."""
    with sessions.begin() as session:
        created = repo_datasets.create_dataset(session, name="doubles", source="jsonl")
        repo_datasets.insert_problems(
            session, dataset_id=created.id, rows=[p.model_dump(mode="json") for p in PROBLEMS]
        )
    return "doubles"


def cobalt(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`cobalt ARGS` in a subprocess with environment `env`, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-c", "from cobalt.shared.commands import main; main()", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def run_sample(
    env: dict[str, str], dataset: str, url: str, model: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """`cobalt run sample --dataset D --base-url U --model M [options]`."""
    return cobalt(
        env, "run", "sample", "--dataset", dataset, "--base-url", url, "--model", model, *options
    )


def json_out(done: subprocess.CompletedProcess[str] | Invoked) -> dict[str, Any]:
    """The JSON a successful `cobalt ... --json` printed."""
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def cobalt_process(
    env: dict[str, str], *args: str, log: Path | None = None
) -> subprocess.Popen[str]:
    """`cobalt ARGS` started in its own process group (so a test can kill it); its output
    is piped, or appended to `log` (a long run fills no pipe nobody reads)."""
    command = [sys.executable, "-c", "from cobalt.shared.commands import main; main()"]
    with contextlib.ExitStack() as files:
        out = subprocess.PIPE if log is None else files.enter_context(log.open("a"))
        return subprocess.Popen(
            [*command, *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )


def worker(env: dict[str, str], *args: str, log: Path | None = None) -> subprocess.Popen[str]:
    """`cobalt worker ARGS` started in its own process group (so a test can kill it)."""
    return cobalt_process(env, "worker", *args, log=log)


def turns_of(sessions: sessionmaker[Session], run_id: int) -> list[Turn]:
    """A run's stored turns by problem, sample and turn."""
    with sessions() as session:
        return list(
            session.scalars(
                select(Turn)
                .where(Turn.run_id == run_id)
                .order_by(Turn.problem_id, Turn.sample_index, Turn.turn_index)
            )
        )


def keys_and_answers(
    sessions: sessionmaker[Session], run_id: int
) -> dict[tuple[int, int, int], str]:
    """A run's stored answers by (problem, sample, turn): what must survive a crash."""
    return {
        (t.problem_id, t.sample_index, t.turn_index): t.raw_response
        for t in turns_of(sessions, run_id)
    }


def wait_finished(api: httpx.Client, run_id: int) -> dict[str, Any]:
    """The run as the REST API shows it once it has ended (finished, failed or cancelled)."""
    deadline = time.monotonic() + 120
    while True:
        run: dict[str, Any] = api.get(f"/v1/runs/{run_id}").json()
        if run["status"] in ("finished", "failed", "cancelled"):
            return run
        assert time.monotonic() < deadline, run
        time.sleep(0.1)


def execute_response(*results: TestResult) -> ExecuteResponse:
    """An executor response holding `results`, its counts derived from their verdicts."""
    passed = sum(result.verdict == Verdict.ACCEPTED for result in results)
    return ExecuteResponse(
        results=list(results),
        passed=passed,
        total=len(results),
        pass_rate=passed / len(results),
        executor_version="test",
    )
