"""Creating a large sample run: what the request waits for, and how the rows are written.

164 problems (HumanEval's count) x 1024 samples is 167,936 pending trajectories. Measured
in a throwaway PostgreSQL database (and with --sqlite, a SQLite file):
- request: what `POST /v1/runs` waits for now (`create_sample_run(defer_trajectories=True)`:
  the run row), and `run_public` of the new run;
- rows, generated: the trajectories written by the database in one INSERT ... SELECT
  (`repo_trajectories.add_sample_trajectories`, done after the request answers);
- rows, sent: the same rows sent from Python as parameters (`ensure_trajectories`), which
  is what the request used to wait for.

    .venv/bin/python bench/run_creation.py [--problems 164] [--samples 1024] [--sqlite]

Prints a markdown table; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sqlalchemy import select  # noqa: E402
from throwaway_db import drop_database, throwaway_database  # noqa: E402

from cobalt.orchestrator.runs import service  # noqa: E402
from cobalt.orchestrator.store import repo_datasets, repo_runs, repo_trajectories  # noqa: E402
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database  # noqa: E402
from cobalt.orchestrator.store.models import Problem, Run  # noqa: E402
from cobalt.shared.clients import ExecutorClientSettings  # noqa: E402
from cobalt.shared.contracts import ProblemRow, StdinTest  # noqa: E402
from cobalt.shared.contracts.runs import (
    RunParams,  # noqa: E402
    SampleRunRequest,  # noqa: E402
)


def measure(url: str, problems: int, samples: int) -> dict[str, float]:
    upgrade_database(url)
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    test = StdinTest(stdin="1", expected_stdout="2")
    rows = [
        ProblemRow(external_id=f"p{i}", statement="s", public_tests=[test], hidden_tests=[test])
        for i in range(problems)
    ]
    with sessions.begin() as session:
        dataset = repo_datasets.create_dataset(session, name="bench", source="jsonl")
        repo_datasets.insert_problems(
            session, dataset_id=dataset.id, rows=[r.model_dump(mode="json") for r in rows]
        )
    request = SampleRunRequest(dataset="bench", base_url="http://x/v1", model="m", n=samples)
    started = time.perf_counter()
    run_id = service.create_sample_run(
        # No executor asked for its maximums: what is timed is the store's work.
        sessions,
        request,
        executor=ExecutorClientSettings(url=None),
        defer_trajectories=True,
    )
    service.run_public(sessions, run_id)
    answered = time.perf_counter() - started
    started = time.perf_counter()
    service.add_missing_trajectories(sessions, run_id)
    generated = time.perf_counter() - started
    with sessions.begin() as session:
        run = session.get(Run, run_id)
        assert run is not None
        copy = repo_runs.create_run(
            session, kind="sample", dataset_id=run.dataset_id, base_url="u", model="m",
            params=RunParams(), template_name="default", template_sha256="0" * 64,
            total_trajectories=0,
        )  # fmt: skip
        ids = list(session.scalars(select(Problem.id).where(Problem.dataset_id == run.dataset_id)))
        started = time.perf_counter()
        keys = [(problem_id, i) for problem_id in ids for i in range(samples)]
        repo_trajectories.ensure_trajectories(session, run_id=copy.id, keys=keys)
        sent = time.perf_counter() - started
    engine.dispose()
    return {"request": answered, "generated": generated, "sent": sent}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=164)
    parser.add_argument("--samples", type=int, default=1024)
    parser.add_argument("--sqlite", action="store_true", help="also measure on a SQLite file")
    args = parser.parse_args()
    results = {}
    url, conninfo, name = throwaway_database()
    try:
        results["PostgreSQL"] = measure(url, args.problems, args.samples)
    finally:
        drop_database(conninfo, name)
    if args.sqlite:
        with tempfile.TemporaryDirectory() as folder:
            results["SQLite"] = measure(f"sqlite:///{folder}/bench.db", args.problems, args.samples)
    rows = args.problems * args.samples
    print(f"{rows:,} trajectories ({args.problems} problems x {args.samples} samples)\n")
    print("| store | request answers | rows generated (after) | rows sent (before) | ratio |")
    print("|---|---|---|---|---|")
    for store, r in results.items():
        ratio = r["sent"] / r["generated"]
        print(
            f"| {store} | {r['request']:.3f} s | {r['generated']:.2f} s | {r['sent']:.2f} s "
            f"| {ratio:.1f}x |"
        )


if __name__ == "__main__":
    main()
