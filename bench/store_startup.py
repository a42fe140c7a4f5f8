"""Start-up of the store-reading commands (`cobalt run list`, `run show`, `run table`,
`data list`, `train list`, `train show`): the baseline tree against this one, side by side.

Each command runs in a fresh interpreter, alternately with the baseline's sources first
on the path (`--before DIR`, a checkout of an earlier commit) and with this tree's, each
against its own SQLite store, migrated by a first untimed call and then seeded with the
UI tests' experiment (tests/ui/seed.py: runs with turns, training jobs), so each command
reads real rows. Both trees' bytecode is cached under one temporary PYTHONPYCACHEPREFIX,
written by the untimed calls (an installed package has its .pyc; without them every call
would also compile the sources, and PYTHONDONTWRITEBYTECODE is dropped for the same
reason). Shown is the best of `--rounds` rounds of the child's CPU time (user + system,
which other work on a shared machine disturbs less than wall time), the wall times of the
round with the lowest load average, and the CPU ratio.

    .venv/bin/python bench/store_startup.py --before DIR [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

COMMANDS = (
    ("run", "list"), ("run", "show", "1"), ("run", "table", "1", "3"), ("data", "list"),
    ("train", "list"), ("train", "show", "1"),
)  # fmt: skip
"""Run 1 and 3 are the seeded experiment's finished runs, job 1 its training job."""

ROOT = Path(__file__).resolve().parents[1]


def sources(tree: Path) -> str:
    return os.pathsep.join(
        str(p) for p in [tree / "shared" / "src", *sorted((tree / "services").glob("*/src"))]
    )


def timed(args: tuple[str, ...], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", "from cobalt.shared.commands import main; main()", *args],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def seed_store(url: str) -> None:
    """The UI tests' experiment in the store at `url` (this tree's code; same schema)."""
    sys.path.insert(0, str(ROOT))
    from cobalt.orchestrator.store.db import make_engine, make_sessionmaker
    from tests.ui.seed import seed

    engine = make_engine(url)
    seed(make_sessionmaker(engine))
    engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        envs = {}
        for label, tree in (("before", options.before), ("this tree", ROOT)):
            env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = f"{folder}/pycache"
            env["PYTHONPATH"] = sources(tree)
            env["COBALT_DATABASE_URL"] = f"sqlite:///{folder}/{label.replace(' ', '-')}.db"
            timed(("data", "list"), env)  # creates and migrates the store, untimed
            seed_store(env["COBALT_DATABASE_URL"])
            for args in COMMANDS:
                timed(args, env)  # writes the bytecode of what each command imports
            envs[label] = env
        print("| command | before CPU s | this tree CPU s | CPU ratio | wall s before / this "
              "(load) |")  # fmt: skip
        print("|---|---|---|---|---|")
        for args in COMMANDS:
            best = {label: float("inf") for label in envs}
            quietest: tuple[float, dict[str, float]] = (float("inf"), {})
            for _ in range(options.rounds):
                load = os.getloadavg()[0]
                walls = {}
                for label, env in envs.items():
                    cpu, wall = timed(args, env)
                    best[label] = min(best[label], cpu)
                    walls[label] = wall
                if load < quietest[0]:
                    quietest = (load, walls)
            b, a = best["before"], best["this tree"]
            load, walls = quietest
            print(
                f"| cobalt {' '.join(args)} | {b:.2f} | {a:.2f} | {b / a:.2f}x "
                f"| {walls['before']:.2f} / {walls['this tree']:.2f} ({load:.1f}) |"
            )


if __name__ == "__main__":
    main()
