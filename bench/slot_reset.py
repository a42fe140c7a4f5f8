"""What the slot reset costs: CPU per test before and after, and the reset after a huge tree.

Before/after (`--baseline REF`, e.g. main): each side runs `--tests` do-nothing tests on a
one-slot pool in a child process, alternating before, after, after, before (so drift in
the machine's load hits both alike), and reports per test the CPU time of the jail (the
zygote, its test processes and everything they reaped) and of the server process, and
the median time in `pool.run`. CPU time is what throughput on a loaded machine is made
of, and it moves far less with the load than wall time does.

Then, on this checkout only: how long the slot takes to reset (`RawRun.handover_ms` of
the next test: the server's time, before that test's clock starts) after a test that
left 15,000 nested folders and 30,000 files.

    .venv/bin/python bench/slot_reset.py --baseline main [--tests 400] [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.executor import SOURCE_LOADER, baseline_checkout  # noqa: E402

PER_TEST = """
import os, resource, statistics, sys, time
from cobalt.executor.pool import SandboxPool
from cobalt.executor.sandbox import SandboxJob
from cobalt.executor.settings import ExecutorSettings

def jail_cpu_s(bwrap_pid):
    # The jail's processes are bwrap and its children (the zygote); each one's own CPU
    # time and that of the children it reaped (every test process).
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(pid) == bwrap_pid or int(fields[1]) == bwrap_pid:
            total += sum(int(value) for value in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")

n = int(sys.argv[1])
pool = SandboxPool(ExecutorSettings(slots=1).sandbox_config())
pool.start()
job = SandboxJob(code="pass", mode="stdin")
for _ in range(20):
    pool.run(job)
(slot,) = pool.slots
jail_before = jail_cpu_s(slot.pid)
own_before = resource.getrusage(resource.RUSAGE_SELF)
walls = []
for _ in range(n):
    started = time.perf_counter()
    pool.run(job)
    walls.append(time.perf_counter() - started)
jail = jail_cpu_s(slot.pid) - jail_before
own_after = resource.getrusage(resource.RUSAGE_SELF)
own = own_after.ru_utime + own_after.ru_stime - own_before.ru_utime - own_before.ru_stime
assert pool.restarts == 0, "a jail was restarted: the CPU sums would be wrong"
pool.close()
print(1000 * jail / n, 1000 * own / n, 1000 * statistics.median(walls))
"""

HUGE_TREE = """
from cobalt.executor.pool import SandboxPool
from cobalt.executor.sandbox import SandboxJob
from cobalt.executor.settings import ExecutorSettings

TREE = '''
import os
fd = os.open("/tmp/run", os.O_RDONLY)
for _ in range(15000):
    os.mkdir("n", dir_fd=fd)
    fd, parent = os.open("n", os.O_RDONLY, dir_fd=fd), fd
    os.close(parent)
for i in range(30000):
    open("/dev/shm/m%d" % i, "w").close()
'''
pool = SandboxPool(ExecutorSettings(slots=1).sandbox_config())
pool.start()
(slot,) = pool.slots
times = []
for _ in range(3):
    raw = slot.run(SandboxJob(code=TREE, mode="stdin", wall_s=120, cpu_s=120))
    assert raw.exit_code == 0, raw.stderr
    after = slot.run(SandboxJob(code="pass", mode="stdin"))
    assert after.exit_code == 0 and pool.restarts == 0
    times.append(after.handover_ms)
pool.close()
print(*times)
"""


def per_test(n: int, source: str | None) -> tuple[float, float, float]:
    loader = [] if source is None else [source]
    done = subprocess.run(
        [sys.executable, "-c", (SOURCE_LOADER if source else "") + PER_TEST, *loader, str(n)],
        capture_output=True,
        text=True,
        check=True,
    )
    jail, own, wall = done.stdout.split()[-3:]
    return float(jail), float(own), float(wall)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", metavar="REF", required=True)
    parser.add_argument("--tests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    runs: dict[str, list[tuple[float, float, float]]] = {"before": [], "after": []}
    with baseline_checkout(args.baseline) as source:
        for _ in range(args.rounds):
            for side in ("before", "after", "after", "before"):
                runs[side].append(per_test(args.tests, source if side == "before" else None))
    tree = subprocess.run(
        [sys.executable, "-c", HUGE_TREE], capture_output=True, text=True, check=True
    ).stdout.split()
    print(f"\n{args.tests} do-nothing tests per run, one slot, {args.rounds * 2} runs a side, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")  # fmt: skip
    print("| side | jail CPU ms/test | server CPU ms/test | p50 ms in pool.run |")
    print("|---|---|---|---|")
    means = {}
    for side, results in runs.items():
        means[side] = [statistics.mean(column) for column in zip(*results, strict=True)]
        jail, own, wall = means[side]
        print(f"| {side} ({args.baseline if side == 'before' else 'this checkout'}) "
              f"| {jail:.2f} | {own:.3f} | {wall:.2f} |")  # fmt: skip
    ratio = [after / before for after, before in zip(means["after"], means["before"], strict=True)]
    print(f"| after/before | {ratio[0]:.2f} | {ratio[1]:.2f} | {ratio[2]:.2f} |")
    print(
        "\nreset after 15,000 nested folders and 30,000 files (handover, server's time): "
        + ", ".join(f"{float(ms):.0f} ms" for ms in tree)
    )


if __name__ == "__main__":
    main()
