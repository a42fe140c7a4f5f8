"""The optional Python package set (numpy, pandas, sympy): what it costs a deployment.

Three configurations of one slot, side by side in one run: none (the standard library
only, the default), the package directory bound but nothing preloaded, and the zygote
preloading numpy, pandas and sympy. For each: the slot's start-up time, the zygote's
resident memory (PSS of the jail's processes, which is what the preloaded modules add
per slot), and the median wall time of a trivial test and of a test that imports all
three packages and uses each once.

    .venv/bin/python bench/python_packages.py [--packages /usr/lib/python3/dist-packages]

Needs the packages installed (Debian: python3-numpy python3-pandas python3-sympy).
Prints a markdown table; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace

from cobalt.executor.pool import SandboxPool
from cobalt.executor.sandbox import SandboxJob
from cobalt.executor.settings import ExecutorSettings

TRIVIAL = SandboxJob(code="print(int(input()) + 1)", mode="stdin", stdin=b"41\n")
USES_ALL = SandboxJob(
    code="import numpy, pandas, sympy\n"
    "print(numpy.arange(4).sum(), pandas.Series([1, 2]).sum(), sympy.factor('x**2 - 1'))",
    mode="stdin",
)


def _jail_pss_kb(pool: SandboxPool) -> int:
    """PSS of every process under the slot's bubblewrap, in KiB."""
    root = pool.slots[0].pid
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(parent, []).append(int(entry))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def measure(packages: str, preload: str, runs: int) -> tuple[float, int, float, float]:
    settings = ExecutorSettings(slots=1, python_packages=packages, python_preload=preload)
    pool = SandboxPool(replace(settings.sandbox_config(), slots=1))
    started = time.perf_counter()
    pool.start()
    start_ms = (time.perf_counter() - started) * 1000
    try:
        pss = _jail_pss_kb(pool)
        times = {}
        for name, job in (("trivial", TRIVIAL), ("uses all", USES_ALL)):
            if job is USES_ALL and not packages:
                times[name] = float("nan")
                continue
            walls = []
            for _ in range(runs):
                raw = pool.run(job)
                assert raw.exit_code == 0, raw.stderr[-400:]
                walls.append(raw.wall_ms)
            times[name] = statistics.median(walls)
        return start_ms, pss, times["trivial"], times["uses all"]
    finally:
        pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packages", default="/usr/lib/python3/dist-packages")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    rows = [
        ("standard library only (default)", measure("", "", args.runs)),
        ("packages bound, none preloaded", measure(args.packages, "", args.runs)),
        (
            "packages bound, numpy,pandas,sympy preloaded",
            measure(args.packages, "numpy,pandas,sympy", args.runs),
        ),
    ]
    print(
        f"\none slot, {args.runs} runs each, "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n"
    )
    print(
        "| configuration | slot start ms | jail PSS MiB | trivial test ms (p50) "
        "| numpy+pandas+sympy test ms (p50) |"
    )
    print("|---|---|---|---|---|")
    for name, (start_ms, pss, trivial, uses) in rows:
        print(f"| {name} | {start_ms:.0f} | {pss / 1024:.0f} | {trivial:.1f} | {uses:.0f} |")


if __name__ == "__main__":
    main()
