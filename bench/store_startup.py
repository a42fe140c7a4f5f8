"""Start-up of the store-reading commands (`cobalt run list`, `cobalt data list`, `cobalt
run show`): the baseline tree against this one, side by side in one process.

Each command runs in a fresh interpreter, alternately with the baseline's sources first
on the path (`--before DIR`, a checkout of an earlier commit) and with this tree's, each
against its own SQLite store (created, then migrated, by a first untimed call). Shown is
the best of `--rounds` rounds of the child's CPU time (user + system, which other work on
a shared machine disturbs less than wall time) and of its wall time, and their ratios.

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

COMMANDS = (("run", "list"), ("data", "list"), ("run", "show", "1"))
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        envs = {}
        for label, tree in (("before", options.before), ("this tree", ROOT)):
            env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
            env["PYTHONPATH"] = sources(tree)
            env["COBALT_DATABASE_URL"] = f"sqlite:///{folder}/{label.replace(' ', '-')}.db"
            timed(("data", "list"), env)  # creates and migrates the store, untimed
            envs[label] = env
        print("| command | before CPU s | this tree CPU s | ratio | before wall s | this wall s |")
        print("|---|---|---|---|---|---|")
        for args in COMMANDS:
            best = {label: [float("inf"), float("inf")] for label in envs}
            for _ in range(options.rounds):
                for label, env in envs.items():
                    cpu, wall = timed(args, env)
                    best[label] = [min(best[label][0], cpu), min(best[label][1], wall)]
            b, a = best["before"], best["this tree"]
            print(
                f"| cobalt {' '.join(args)} | {b[0]:.2f} | {a[0]:.2f} | {b[0] / a[0]:.2f}x "
                f"| {b[1]:.2f} | {a[1]:.2f} |"
            )


if __name__ == "__main__":
    main()
