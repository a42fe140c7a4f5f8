"""Turn-write throughput into PostgreSQL: `insert_turns` against a naive ORM baseline.

The workload is generated turn rows of realistic size: a ~2 KB raw response (reasoning
plus a code block), a ~0.7 KB stored response, at turn 0 the prompt (system message and a
~1.5 KB statement; later turns store none, see `Turn.messages`), 200 prompt and 200
completion token ids with 200 logprobs (packed: 3.2 KB), 4 public verdicts. Rows are
built before the clock starts, since a worker has them in hand; the sides differ only in
how rows reach the database:

- naive: one ORM `session.add(Turn(...))` and one commit per turn;
- cobalt: `insert_turns`, one executemany of `INSERT ... ON CONFLICT DO NOTHING` per
  batch of `--batch-size` turns, one transaction per batch (as a worker commits);
- cobalt, retried: the same batches again, every row a conflict (what a retried job costs).

`--token-ids 0` drops the ids and logprobs (an endpoint that is not vLLM), to show their
share.

The database is a throwaway one created on the test server (COBALT_TEST_POSTGRES_URL,
default postgres@127.0.0.1:5432) and dropped at the end.

    .venv/bin/python bench/turn_writes.py [--rows 20000] [--naive-rows 2000] [--batch-size 500]
        [--token-ids 200]

Prints a markdown table; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import time
from dataclasses import asdict

from sqlalchemy import select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker
from throwaway_db import ADMIN_URL, drop_database, throwaway_database

from cobalt.orchestrator.store import repo_datasets, repo_runs, repo_trajectories, repo_turns
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
from cobalt.orchestrator.store.models import Trajectory, Turn
from cobalt.orchestrator.store.repo_turns import TurnRow
from cobalt.shared.contracts.runs import RunParams

TARGET_PER_S = 5000.0
"""Turn rows per second the batched writes must reach on the build machine."""
TURNS_PER_TRAJECTORY = 5
SAMPLES_PER_PROBLEM = 8
DEFAULT_TOKEN_IDS = 200
"""Prompt token ids, completion token ids and logprobs per turn (each)."""

WORDS = [
    "".join(random.Random(n).choices(string.ascii_lowercase, k=random.Random(n).randint(2, 9)))
    for n in range(500)
]


def text_of(rng: random.Random, size: int) -> str:
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def turn_row(rng: random.Random, run_id: int, key: tuple[int, int, int], token_ids: int) -> TurnRow:
    problem_id, sample_index, turn_index = key
    code = "import sys\n" + "\n".join(
        f"x{i} = int(sys.stdin.readline())  # {text_of(rng, 20)}" for i in range(12)
    )
    stored = f"I will read the input and sum it.\n\n```python\n{code}\n```"
    raw = f"<think>{text_of(rng, 2048 - len(stored) - 15)}</think>{stored}"
    # As workers write them: turn 0 stores the prompt, later turns rebuild theirs from the
    # trajectory's rows (store/models.py, Turn.messages).
    messages = (
        [
            {"role": "system", "content": "You are a careful competitive programmer."},
            {"role": "user", "content": text_of(rng, 1500)},
        ]
        if turn_index == 0
        else []
    )
    return TurnRow(
        run_id=run_id,
        problem_id=problem_id,
        sample_index=sample_index,
        turn_index=turn_index,
        messages=messages,
        raw_response=raw,
        stored_response=stored,
        code=code,
        public_verdicts=["accepted", "accepted", "wrong_answer", "accepted"],
        public_passed=False,
        feedback="Test 3 failed: expected 7, got 6. Fix the program.",
        model="Qwen/Qwen3-1.7B",
        finish_reason="stop",
        prompt_token_ids=[rng.randrange(150_000) for _ in range(token_ids)] or None,
        completion_token_ids=[rng.randrange(150_000) for _ in range(token_ids)] or None,
        completion_logprobs=[-rng.random() * 3 for _ in range(token_ids)] or None,
        prompt_tokens=token_ids,
        completion_tokens=token_ids,
        model_latency_ms=rng.uniform(200, 4000),
        exec_latency_ms=rng.uniform(5, 300),
        policy_version=3,
    )


def payload_bytes(row: TurnRow) -> int:
    """Bytes a row hands the database before compression: texts, JSON, packed arrays."""
    texts = (row.raw_response, row.stored_response, row.code or "", row.feedback, row.model)
    arrays = 4 * len(row.prompt_token_ids or []) + 4 * len(row.completion_token_ids or [])
    arrays += 8 * len(row.completion_logprobs or [])
    return (
        sum(len(text.encode()) for text in texts)
        + len(json.dumps(row.messages))
        + len(json.dumps(row.public_verdicts))
        + arrays
    )


def prepare_run(
    sessions: sessionmaker[Session],
    *,
    dataset_id: int,
    problems: list[int],
    rows: int,
    seed: int,
    token_ids: int,
) -> tuple[list[TurnRow], dict[tuple[int, int, int], int]]:
    """A run with enough trajectories for `rows` turns, its rows and trajectory ids."""
    keys: list[tuple[int, int, int]] = []
    for problem_id in problems:
        for sample_index in range(SAMPLES_PER_PROBLEM):
            keys += [(problem_id, sample_index, t) for t in range(TURNS_PER_TRAJECTORY)]
    keys = keys[:rows]
    assert len(keys) == rows, "not enough problems for --rows"
    with sessions.begin() as session:
        run = repo_runs.create_run(
            session,
            kind="sample",
            dataset_id=dataset_id,
            base_url="http://127.0.0.1:8000/v1",
            model="Qwen/Qwen3-1.7B",
            params=RunParams(n=SAMPLES_PER_PROBLEM, turns=TURNS_PER_TRAJECTORY),
            template_name="cobalt",
            template_sha256="0" * 64,
        )
        trajectories = sorted({(p, s) for p, s, _ in keys})
        repo_trajectories.ensure_trajectories(session, run_id=run.id, keys=trajectories)
        ids = {
            (run.id, p, s): id_
            for p, s, id_ in session.execute(
                select(Trajectory.problem_id, Trajectory.sample_index, Trajectory.id).where(
                    Trajectory.run_id == run.id
                )
            )
        }
    rng = random.Random(seed)
    return [turn_row(rng, run.id, key, token_ids) for key in keys], ids


def run_naive(
    sessions: sessionmaker[Session], rows: list[TurnRow], ids: dict[tuple[int, int, int], int]
) -> float:
    started = time.perf_counter()
    for row in rows:
        with sessions.begin() as session:
            session.add(Turn(trajectory_id=ids[row.trajectory_key], **asdict(row)))
    return time.perf_counter() - started


def run_cobalt(sessions: sessionmaker[Session], rows: list[TurnRow], batch_size: int) -> int:
    inserted = 0
    for start in range(0, len(rows), batch_size):
        with sessions.begin() as session:
            inserted += repo_turns.insert_turns(session, rows=rows[start : start + batch_size])
    return inserted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--naive-rows", type=int, default=2_000)
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument(
        "--token-ids",
        type=int,
        default=DEFAULT_TOKEN_IDS,
        help="prompt ids, completion ids and logprobs per turn, each (0: none, as a "
        "non-vLLM endpoint gives)",
    )
    args = parser.parse_args()
    problems_needed = -(
        -max(args.rows, args.naive_rows) // (SAMPLES_PER_PROBLEM * TURNS_PER_TRAJECTORY)
    )

    url, conninfo, name = throwaway_database()
    try:
        upgrade_database(url)
        engine = make_engine(url)
        sessions = make_sessionmaker(engine)
        with sessions.begin() as session:
            dataset = repo_datasets.create_dataset(session, name="bench", source="jsonl")
            repo_datasets.insert_problems(
                session,
                dataset_id=dataset.id,
                rows=[
                    {
                        "external_id": f"bench-{number:06d}",
                        "statement": "Sum the numbers.",
                        "test_style": "stdin",
                    }
                    for number in range(problems_needed)
                ],
            )
            problems = [p.id for p in repo_datasets.iter_problems(session, dataset_id=dataset.id)]
        naive_rows, naive_ids = prepare_run(
            sessions,
            dataset_id=dataset.id,
            problems=problems,
            rows=args.naive_rows,
            seed=1,
            token_ids=args.token_ids,
        )
        cobalt_rows, _ = prepare_run(
            sessions,
            dataset_id=dataset.id,
            problems=problems,
            rows=args.rows,
            seed=2,
            token_ids=args.token_ids,
        )
        row_bytes = sum(payload_bytes(row) for row in cobalt_rows) / len(cobalt_rows)

        naive_s = run_naive(sessions, naive_rows, naive_ids)
        started = time.perf_counter()
        cobalt_n = run_cobalt(sessions, cobalt_rows, args.batch_size)
        cobalt_s = time.perf_counter() - started
        started = time.perf_counter()
        retried_n = run_cobalt(sessions, cobalt_rows, args.batch_size)
        retried_s = time.perf_counter() - started
        with sessions.begin() as session:
            stored = sum(
                repo_runs.run_progress(session, run_id=run.id).turns
                for run in repo_runs.list_runs(session)
            )
        engine.dispose()
    finally:
        drop_database(conninfo, name)
    assert cobalt_n == args.rows and retried_n == 0, (cobalt_n, retried_n)
    assert stored == args.rows + args.naive_rows, stored

    naive_rate, cobalt_rate = args.naive_rows / naive_s, cobalt_n / cobalt_s
    retried_rate = args.rows / retried_s
    print(
        f"turn rows of {row_bytes / 1024:.1f} KiB on average before compression (2 KB raw "
        "response, "
        f"{args.token_ids} prompt + {args.token_ids} completion token ids, "
        f"{args.token_ids} logprobs); "
        f"PostgreSQL at {make_url(ADMIN_URL).host}\n"
    )
    print("| method | rows | seconds | rows/s |")
    print("|---|---:|---:|---:|")
    print(
        f"| naive: ORM add + commit per turn | {args.naive_rows} | {naive_s:.2f} "
        f"| {naive_rate:,.0f} |"
    )
    print(
        f"| cobalt: `insert_turns`, {args.batch_size} per batch, commit per batch "
        f"| {cobalt_n} | {cobalt_s:.2f} | {cobalt_rate:,.0f} |"
    )
    print(
        f"| cobalt, retried: the same batches again (all conflicts, 0 written) "
        f"| {args.rows} | {retried_s:.2f} | {retried_rate:,.0f} |"
    )
    verdict = "meets" if cobalt_rate >= TARGET_PER_S else "MISSES"
    print(
        f"\ncobalt / naive: {cobalt_rate / naive_rate:.1f}x; "
        f"{verdict} the target of {TARGET_PER_S:,.0f} turn rows/s"
    )


if __name__ == "__main__":
    main()
