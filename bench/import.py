"""Import throughput into PostgreSQL: `import_file` against a naive ORM baseline.

The workload is a generated JSONL file of problems with realistic sizes: a 1-2 KB
statement, 4 public and 16 hidden stdin tests (inputs of 10-300 characters). Both sides
read and validate the same file with the `jsonl` importer, so they differ only in how
rows reach the database:

- naive: one ORM `session.add(Problem(...))` and one commit per problem;
- cobalt: `import_file`, one `INSERT ... ON CONFLICT DO NOTHING` per batch of
  `--batch-size` problems and one transaction for the whole file.

A third row times reading and validating alone (no database), the ceiling of both.
The database is a throwaway one created on the test server (COBALT_TEST_POSTGRES_URL,
default postgres@127.0.0.1:5432) and dropped at the end.

    .venv/bin/python bench/import.py [--problems 10000] [--naive-problems N] [--batch-size 1000]

Prints a markdown table; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import random
import string
import tempfile
import time
from pathlib import Path

from sqlalchemy.engine import make_url
from throwaway_db import ADMIN_URL, drop_database, throwaway_database

from cobalt.orchestrator.datasets.importers.jsonl import read_problems
from cobalt.orchestrator.datasets.importing import ImportOptions, import_file
from cobalt.orchestrator.datasets.records import BadRow
from cobalt.orchestrator.store import repo_datasets
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
from cobalt.orchestrator.store.models import Problem

TARGET_PER_S = 2000.0
"""Problems per second the batched import must reach on the build machine."""

WORDS = [
    "".join(random.Random(n).choices(string.ascii_lowercase, k=random.Random(n).randint(2, 9)))
    for n in range(500)
]


def statement(rng: random.Random) -> str:
    size = rng.randint(1000, 2000)
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size] + "\n\nInput\nOne line of integers.\n\nOutput\nOne integer."


def stdin_test(rng: random.Random) -> dict[str, str]:
    values = [str(rng.randint(-(10**6), 10**6)) for _ in range(rng.randint(2, 40))]
    return {"stdin": f"{len(values)}\n{' '.join(values)}\n", "expected_stdout": str(rng.random())}


def write_problems(path: Path, count: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    with path.open("w", encoding="utf-8") as out:
        for number in range(count):
            row = {
                "external_id": f"bench-{number:06d}",
                "statement": statement(rng),
                "test_style": "stdin",
                "public_tests": [stdin_test(rng) for _ in range(4)],
                "hidden_tests": [stdin_test(rng) for _ in range(16)],
                "difficulty": rng.choice(["EASY", "MEDIUM", "HARD"]),
                "source_metadata": {"url": f"https://example.org/problems/{number}"},
            }
            out.write(json.dumps(row) + "\n")
    return path.stat().st_size


def run_validate_only(path: Path) -> tuple[int, float]:
    started = time.perf_counter()
    count = sum(1 for item in read_problems(path, ImportOptions()) if not isinstance(item, BadRow))
    return count, time.perf_counter() - started


def run_naive(url: str, path: Path, limit: int) -> tuple[int, float]:
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    with sessions.begin() as session:
        dataset_id = repo_datasets.create_dataset(session, name="naive", source="jsonl").id
    count = 0
    started = time.perf_counter()
    for number, item in enumerate(read_problems(path, ImportOptions()), start=1):
        if number > limit:
            break
        if isinstance(item, BadRow):
            continue
        with sessions.begin() as session:
            session.add(Problem(dataset_id=dataset_id, **item.model_dump(mode="json")))
        count += 1
    elapsed = time.perf_counter() - started
    engine.dispose()
    return count, elapsed


def run_cobalt(url: str, path: Path, batch_size: int) -> tuple[int, float]:
    engine = make_engine(url)
    sessions = make_sessionmaker(engine)
    started = time.perf_counter()
    report = import_file(
        sessions=sessions,
        name="cobalt",
        fmt="jsonl",
        path=path,
        options=ImportOptions(),
        batch_size=batch_size,
    )
    elapsed = time.perf_counter() - started
    with sessions.begin() as session:
        dataset = repo_datasets.get_dataset(session, name="cobalt")
        assert dataset is not None
        stored = repo_datasets.count_problems(session, dataset_id=dataset.id)
    engine.dispose()
    assert stored == report.inserted and not report.bad, (stored, report)
    return report.inserted, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=10_000)
    parser.add_argument(
        "--naive-problems", type=int, default=None, help="problems for the naive run (all)"
    )
    parser.add_argument("--batch-size", type=int, default=1000)
    args = parser.parse_args()
    naive_limit = args.naive_problems or args.problems

    with tempfile.TemporaryDirectory(prefix="cobalt-bench-import-") as workdir:
        path = Path(workdir) / "problems.jsonl"
        size = write_problems(path, args.problems)
        url, conninfo, name = throwaway_database()
        try:
            upgrade_database(url)
            read_n, read_s = run_validate_only(path)
            naive_n, naive_s = run_naive(url, path, naive_limit)
            cobalt_n, cobalt_s = run_cobalt(url, path, args.batch_size)
        finally:
            drop_database(conninfo, name)

    naive_rate, cobalt_rate = naive_n / naive_s, cobalt_n / cobalt_s
    print(
        f"{args.problems} problems, {size / args.problems / 1024:.1f} KiB each on average "
        f"(JSONL {size / 2**20:.1f} MiB), 4 public + 16 hidden stdin tests; PostgreSQL "
        f"at {make_url(ADMIN_URL).host}\n"
    )
    print("| method | problems | seconds | problems/s |")
    print("|---|---:|---:|---:|")
    print(
        f"| read + validate only (no database) | {read_n} | {read_s:.2f} | {read_n / read_s:,.0f} |"
    )
    print(
        f"| naive: ORM add + commit per problem | {naive_n} | {naive_s:.2f} | {naive_rate:,.0f} |"
    )
    print(
        f"| cobalt: `import_file`, {args.batch_size} per INSERT, one transaction | {cobalt_n} "
        f"| {cobalt_s:.2f} | {cobalt_rate:,.0f} |"
    )
    verdict = "meets" if cobalt_rate >= TARGET_PER_S else "MISSES"
    print(
        f"\ncobalt / naive: {cobalt_rate / naive_rate:.1f}x; "
        f"{verdict} the target of {TARGET_PER_S:,.0f} problems/s"
    )


if __name__ == "__main__":
    main()
