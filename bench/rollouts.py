"""Orchestration cost of a rollout turn, and throughput with 1, 2 and 4 RQ workers.

The model is the deterministic fake OpenAI server from the tests (it answers at once) in a
process of its own, the executor a real `cobalt executor serve`, the database a throwaway
PostgreSQL database, the queue Redis (db 14, flushed). So what is measured is Cobalt's own
work:

- overhead per turn: one job (1 problem, n=1, `--turns` feedback turns) run in this
  process; its wall time minus the model latency and executor latency that the turns
  themselves recorded, divided by the turns. Target: <= 5 ms median. n=1 is the worst
  case: with n samples a turn's database write and bookkeeping are shared by n rows, and
  the per-row latencies would overlap (so they could not simply be subtracted).
- throughput: a sample run of `--problems` problems x n=4 x 2 feedback turns on the
  queue, done by 1, 2 and 4 `cobalt worker --burst` processes; turns per second and the
  efficiency against perfect scaling from one worker. Once with an instant model (the
  executor's sandboxes and the workers then share the CPU) and once with a model that
  takes `--model-delay-ms` per answer (the wait that workers overlap).

    .venv/bin/python bench/rollouts.py [--problems 48] [--turns 8] [--repeats 20]
        [--model-delay-ms 250]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from redis import Redis
from sqlalchemy import select
from throwaway_db import drop_database, throwaway_database

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from cobalt.orchestrator.runs import service  # noqa: E402
from cobalt.orchestrator.settings import OrchestratorSettings  # noqa: E402
from cobalt.orchestrator.store import repo_datasets  # noqa: E402
from cobalt.orchestrator.store.db import (  # noqa: E402
    make_engine,
    make_sessionmaker,
    upgrade_database,
)
from cobalt.orchestrator.store.models import Turn  # noqa: E402
from cobalt.orchestrator.worker import queue  # noqa: E402
from cobalt.orchestrator.worker.jobs import JobResources, run_problem, work_for_run  # noqa: E402
from cobalt.shared.clients import ExecutorAddress, ExecutorClientSettings  # noqa: E402
from cobalt.shared.clients.local_executor import local_executor  # noqa: E402
from cobalt.shared.contracts import ProblemRow, StdinTest  # noqa: E402
from cobalt.shared.contracts.runs import SampleRunRequest  # noqa: E402

REDIS_URL = "redis://127.0.0.1:6379/14"
ANSWER = "Answer:\n```python\nprint(2 * int(input()))\n```"
NOT_ASKED = ExecutorClientSettings(url=None)
"""No executor asked for its maximums at run creation: the runs use the default limits,
and the timings stay those of the rollouts alone."""


@contextmanager
def fake_model_process(delay_s: float = 0.0) -> Iterator[str]:
    """The tests' fake OpenAI server in a process of its own; yields its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.openai_server", ANSWER, str(delay_s)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise RuntimeError("the fake model server did not start")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def problems(count: int) -> list[dict[str, object]]:
    return [
        ProblemRow(
            external_id=f"p{i}",
            statement=f"Read n and print 2n. Problem {i}. " * 20,
            public_tests=[StdinTest(stdin=str(k), expected_stdout=str(2 * k)) for k in range(4)],
            hidden_tests=[StdinTest(stdin=str(k), expected_stdout=str(2 * k)) for k in range(8)],
        ).model_dump(mode="json")
        for i in range(count)
    ]


def overhead_per_turn_ms(
    sessions, settings, url, executor, turns: int, repeats: int
) -> list[float]:
    samples = []
    for _ in range(repeats):
        run_id = service.create_sample_run(
            sessions,
            SampleRunRequest(
                dataset="bench", base_url=url, model="fake-model", n=1, turns=turns, limit=1
            ),
            executor=NOT_ASKED,
        )
        (problem_id,) = service.open_problem_ids(sessions, run_id)
        started = time.perf_counter()
        run_problem(
            run_id,
            problem_id,
            resources=JobResources.here(
                settings, ExecutorAddress(executor.base_url, executor.token), api_key=None
            ),
        )
        wall_ms = (time.perf_counter() - started) * 1000
        with sessions() as session:
            rows = session.scalars(select(Turn).where(Turn.run_id == run_id)).all()
        spent = sum(t.model_latency_ms + t.exec_latency_ms for t in rows)
        samples.append((wall_ms - spent) / len(rows))
    return samples


def throughput(env, sessions, url, problem_count: int, workers: int) -> float:
    Redis.from_url(REDIS_URL).flushdb()
    run_id = service.create_sample_run(
        sessions,
        SampleRunRequest(
            dataset="bench", base_url=url, model="fake-model", n=4, turns=2, limit=problem_count
        ),
        executor=NOT_ASKED,
    )
    settings = OrchestratorSettings(database_url=env["COBALT_DATABASE_URL"], redis_url=REDIS_URL)
    work = work_for_run(run_id, service.open_problem_ids(sessions, run_id))
    queue.enqueue(settings, work.values(), api_key=None)
    started = time.perf_counter()
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from cobalt.shared.commands import main; main()",
                "worker",
                "--burst",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(workers)
    ]
    for proc in procs:
        proc.wait()
    elapsed = time.perf_counter() - started
    turns = service.run_public(sessions, run_id).turns_written
    assert turns == problem_count * 4 * 3, turns
    return turns / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--problems", type=int, default=48)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--model-delay-ms",
        type=float,
        default=250.0,
        help="the fake model's answer time for the second throughput measurement (a real "
        "model takes seconds; workers exist to overlap that wait)",
    )
    args = parser.parse_args()

    url_db, conninfo, name = throwaway_database()
    try:
        upgrade_database(url_db)
        engine = make_engine(url_db)
        sessions = make_sessionmaker(engine)
        with sessions.begin() as session:
            dataset = repo_datasets.create_dataset(session, name="bench", source="jsonl")
            repo_datasets.insert_problems(
                session, dataset_id=dataset.id, rows=problems(args.problems)
            )
        settings = OrchestratorSettings(database_url=url_db)
        with local_executor() as executor:
            with fake_model_process() as url:
                overhead = overhead_per_turn_ms(
                    sessions, settings, url, executor, args.turns, args.repeats
                )
            env = {
                **{k: v for k, v in os.environ.items() if not k.startswith("COBALT_")},
                "COBALT_DATABASE_URL": url_db,
                "COBALT_REDIS_URL": REDIS_URL,
                "COBALT_EXECUTOR_URL": executor.base_url,
                "COBALT_EXECUTOR_AUTH_TOKEN": executor.token or "",
                "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
            }
            rates: dict[float, dict[int, float]] = {}
            for delay_ms in (0.0, args.model_delay_ms):
                with fake_model_process(delay_ms / 1000) as url:
                    rates[delay_ms] = {
                        w: throughput(env, sessions, url, args.problems, w) for w in (1, 2, 4)
                    }
        engine.dispose()
    finally:
        Redis.from_url(REDIS_URL).flushdb()
        drop_database(conninfo, name)

    print("\n| measure | value |\n|---|---|")
    print(
        f"| orchestration overhead per turn (model and execution excluded), median / p90 | "
        f"{statistics.median(overhead):.1f} ms / "
        f"{statistics.quantiles(overhead, n=10)[-1]:.1f} ms |"
    )
    for delay_ms, by_workers in rates.items():
        model = f"model answering in {delay_ms:.0f} ms" if delay_ms else "instant model"
        for workers, rate in by_workers.items():
            efficiency = rate / (by_workers[1] * workers)
            print(
                f"| {model}, {workers} worker(s): turns/s (efficiency) "
                f"| {rate:.1f} ({efficiency:.0%}) |"
            )


if __name__ == "__main__":
    main()
