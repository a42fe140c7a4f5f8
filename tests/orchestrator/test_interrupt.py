"""Ctrl-C on long commands: a real SIGINT to a real `cobalt run sample` process (and to a
real `cobalt worker`) against the deterministic model server and the real executor and
store. The command stops at once (it does not wait for the model call in flight, which
never ends), says "interrupted", exits 130 and leaves the run `interrupted`; `cobalt run
resume` then finishes it with every turn stored once. A stopped worker's job goes back on
the queue and another worker finishes the run the same way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from cobalt.orchestrator.store.models import Run
from tests.fakes.openai_server import FakeOpenAI
from tests.support.cli import cobalt_here
from tests.support.runs import (
    add_doubles,
    cobalt,
    json_out,
    keys_and_answers,
    run_sample,
    turns_of,
    worker,
)

N, TURNS = 2, 2
HANG_S = 3600.0
"""A model call the interrupt must not wait for (the test would time out first)."""


def _start_sample(env: dict[str, str], url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from cobalt.shared.commands import main; main()",
            *("run", "sample", "--dataset", "doubles", "--base-url", url),
            *("--model", "fake-model", "--n", str(N), "--turns", str(TURNS), "--json"),
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )


def _run_id(sessions: sessionmaker[Session]) -> int | None:
    with sessions() as session:
        return session.scalar(select(func.max(Run.id)))


def _wait_for(condition: object, what: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.parametrize("executor", ["given", "local"])
def test_ctrl_c_marks_the_run_interrupted_and_resume_loses_and_duplicates_nothing(
    fake_model: tuple[FakeOpenAI, str],
    cli_env: dict[str, str],
    sessions: sessionmaker[Session],
    store_url: str,
    executor: str,
) -> None:
    """`given`: COBALT_EXECUTOR_URL's executor; `local`: the one the command starts for
    itself, which the terminal's Ctrl-C must not kill under the jobs still using it."""
    if executor == "local":
        if store_url.startswith("postgresql"):
            pytest.skip("the local executor's path is the same on both stores")
        cli_env = {k: v for k, v in cli_env.items() if k != "COBALT_EXECUTOR_URL"}
    fake, url = fake_model
    add_doubles(sessions)
    # Every model call after the first (one problem's turn 0, N turns) hangs: set before
    # the run starts, as a fast run could otherwise finish between two polls.
    fake.delay_s, fake.delay_after = HANG_S, 1
    process = _start_sample(cli_env, url)
    try:
        _wait_for(lambda: _run_id(sessions) is not None, "the run")
        run_id = _run_id(sessions)
        assert run_id is not None
        _wait_for(lambda: len(turns_of(sessions, run_id)) >= N, "the first turns", 300)
        _wait_for(lambda: len(fake.requests) > 1, "a model call in flight")
        before = keys_and_answers(sessions, run_id)
        sent = time.monotonic()
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group gets it
        _, stderr = process.communicate(timeout=60)
        print(f"stopped {time.monotonic() - sent:.2f} s after SIGINT")
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and f"cobalt run resume {run_id}" in stderr
    assert "Traceback" not in stderr and "retry" not in stderr.lower(), stderr

    shown = json_out(cobalt(cli_env, "run", "show", str(run_id), "--json"))
    assert shown["status"] == "interrupted"
    assert {t["status"] for t in shown["trajectories"]} <= {"pending", "finished"}
    after_stop = keys_and_answers(sessions, run_id)
    assert {k: after_stop[k] for k in before} == before  # nothing written was lost

    fake.delay_s = 0.0
    resumed = cobalt(cli_env, "run", "resume", str(run_id), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "finished"
    turns = turns_of(sessions, run_id)
    keys = [(t.problem_id, t.sample_index, t.turn_index) for t in turns]
    problems = sorted({k[0] for k in keys})
    assert len(problems) == 2
    # every turn of every trajectory exactly once
    assert keys == [(p, s, t) for p in problems for s in range(N) for t in range(TURNS + 1)]
    assert {k: t.raw_response for k, t in zip(keys, turns, strict=True) if k in before} == before


def test_ctrl_c_in_any_command_says_interrupted_and_exits_130(
    cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from cobalt.orchestrator.runs import service

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(service, "list_runs", interrupted)
    done = cobalt_here(cli_env, "run", "list")
    assert done.returncode == 130
    assert done.stderr.strip() == "interrupted"


def test_ctrl_c_stops_a_worker_at_once_and_its_job_goes_back_on_the_queue(
    pg_dataset: str,
    fake_model: tuple[FakeOpenAI, str],
    rq_env: dict[str, str],
    pg_sessions: sessionmaker[Session],
) -> None:
    fake, url = fake_model
    fake.delay_s, fake.delay_after = HANG_S, 1  # calls after the first hang (see above)
    # No retries: the stopped worker's job must go back on the queue all the same.
    rq_env = {**rq_env, "COBALT_JOB_RETRIES": "0"}
    run_id = json_out(
        run_sample(
            rq_env,
            pg_dataset,
            url,
            "fake-model",
            "--n",
            str(N),
            "--turns",
            str(TURNS),
            "--detach",
            "--json",
        )  # fmt: skip
    )["run_id"]
    victim = worker(rq_env)
    try:
        _wait_for(lambda: len(turns_of(pg_sessions, run_id)) >= N, "the first turns")
        _wait_for(lambda: len(fake.requests) > 1, "a model call in flight")
        before = keys_and_answers(pg_sessions, run_id)
        victim.send_signal(signal.SIGINT)
        output, _ = victim.communicate(timeout=60)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.communicate()
    assert victim.returncode == 130, output
    assert "interrupted" in output
    shown = json_out(cobalt(rq_env, "run", "show", str(run_id), "--json"))
    assert shown["status"] in ("pending", "running")  # the run goes on without this worker
    assert "running" not in {t["status"] for t in shown["trajectories"]}

    fake.delay_s = 0.0
    finisher = worker(rq_env, "--burst")
    finished, _ = finisher.communicate(timeout=180)
    assert finisher.returncode == 0, finished
    after = keys_and_answers(pg_sessions, run_id)
    problems = sorted({k[0] for k in after})
    assert sorted(after) == [
        (p, s, t) for p in problems for s in range(N) for t in range(TURNS + 1)
    ]
    assert {k: after[k] for k in before} == before
    assert json_out(cobalt(rq_env, "run", "show", str(run_id), "--json"))["status"] == "finished"
