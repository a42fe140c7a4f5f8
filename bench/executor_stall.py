"""How long a big request body holds the executor's event loop (`/healthz` with it).

A probe thread calls `GET /healthz` back to back on a keep-alive connection while another
posts one ~20 MiB request (two stdin tests of 10 MiB of short lines each, so the JSON is
full of escapes); the longest `/healthz` answer during the post is the stall. Kubernetes
kills a pod whose liveness probe does not answer within its timeout (1 s by default).

    .venv/bin/python bench/executor_stall.py [--baseline REF] [--rounds 5]

With `--baseline`, the executor of that git ref runs beside this checkout's, in the order
before, after, after, before. Figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import threading
import time
from dataclasses import dataclass

from executor import ServerProcess, baseline_checkout, percentile

from cobalt.executor.settings import ExecutorSettings

LINE = "1234567\n"
LINES_PER_TEST = 10_000_000 // len(LINE)
PROGRAM = "import sys\nprint(len(sys.stdin.read()))"


def big_body() -> bytes:
    test = {"stdin": LINE * LINES_PER_TEST, "expected_stdout": str(len(LINE) * LINES_PER_TEST)}
    return json.dumps({"code": PROGRAM, "tests": [test, test]}).encode()


@dataclass
class Round:
    stall_ms: float
    """Longest /healthz answer while the big request was in flight."""
    probe_p99_ms: float
    post_s: float
    verdicts: list[str]


def one_round(port: int, body: bytes) -> Round:
    latencies: list[float] = []
    posting = threading.Event()
    done = threading.Event()

    def probe() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        while not done.is_set():
            started = time.perf_counter()
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            if posting.is_set():
                latencies.append((time.perf_counter() - started) * 1000)
            time.sleep(0.002)
        conn.close()

    prober = threading.Thread(target=probe)
    prober.start()
    time.sleep(0.2)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    posting.set()
    started = time.perf_counter()
    conn.request("POST", "/v1/execute", body, {"content-type": "application/json"})
    response = conn.getresponse()
    answer = json.loads(response.read())
    post_s = time.perf_counter() - started
    posting.clear()
    done.set()
    prober.join()
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"the big request answered {response.status}: {str(answer)[:300]}")
    return Round(
        max(latencies),
        percentile(latencies, 0.99),
        post_s,
        [result["verdict"] for result in answer["results"]],
    )


def measure(server: ServerProcess, body: bytes, rounds: int) -> list[Round]:
    one_round(server.port, body)  # warm-up: first use of every code path
    return [one_round(server.port, body) for _ in range(rounds)]


def summary(name: str, rounds: list[Round]) -> str:
    stalls = [r.stall_ms for r in rounds]
    return (
        f"| {name} | {statistics.median(stalls):.0f} | {max(stalls):.0f} "
        f"| {statistics.median(r.probe_p99_ms for r in rounds):.0f} "
        f"| {statistics.median(r.post_s for r in rounds):.2f} "
        f"| {', '.join(sorted(set(v for r in rounds for v in r.verdicts)))} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", metavar="REF", help="also run the executor of this ref")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--port", type=int, default=8196)
    args = parser.parse_args()
    body = big_body()
    settings = ExecutorSettings(slots=2)
    results: dict[str, list[Round]] = {"before": [], "after": []}
    with baseline_checkout(args.baseline) as source:
        servers = {"after": ServerProcess(settings, args.port)}
        if source is not None:
            servers["before"] = ServerProcess(settings, args.port + 1, source=source)
        for server in servers.values():
            server.__enter__()
        try:
            order = ["before", "after", "after", "before"] if source else ["after"]
            for name in order:
                results[name] += measure(servers[name], body, max(1, args.rounds // 2))
        finally:
            for server in servers.values():
                server.__exit__()
    print(f"\nbody: {len(body) / (1 << 20):.1f} MiB, two stdin tests of 10 MB each\n")
    print("| executor | /healthz stall p50 ms | stall max ms | probe p99 ms | post s | verdicts |")
    print("|---|---|---|---|---|---|")
    for name, rounds in results.items():
        if rounds:
            label = f"before ({args.baseline})" if name == "before" else "after (this checkout)"
            print(summary(label, rounds))


if __name__ == "__main__":
    main()
