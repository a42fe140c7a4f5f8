"""One request per program against one request per test (verl's way through `/run_code`).

The same programs and tests are judged twice by `cobalt executor serve`: once as one
`/v1/execute` per program with all its tests, once as one `/run_code` per test with the
output compared by the client, as verl's sandbox_fusion reward does. Both keep the same
number of requests in flight. Reports tests/s of each and the ratio.

    .venv/bin/python bench/executor_per_test.py [--programs 40] [--tests 10] [--in-flight 8]

Figures go to docs/benchmarks.md ("One request per program or per test").
"""

from __future__ import annotations

import argparse
import functools
import http.client
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from executor import ServerProcess  # noqa: E402

from cobalt.executor.settings import ExecutorSettings  # noqa: E402

PROGRAM = "n = int(input())\nprint(sum(i * i for i in range(n)))\n"


def tests_of(program: int, count: int) -> list[tuple[str, str]]:
    sizes = [1000 + 97 * program + 13 * t for t in range(count)]
    return [(f"{n}\n", str(sum(i * i for i in range(n)))) for n in sizes]


def post(port: int, path: str, body: dict[str, Any], local: dict[int, Any]) -> dict[str, Any]:
    import threading

    key = threading.get_ident()
    if key not in local:
        local[key] = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    conn: http.client.HTTPConnection = local[key]
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
    response = conn.getresponse()
    data = response.read()
    if response.status != 200:
        raise RuntimeError(f"{path}: {response.status} {data[:300]!r}")
    parsed: dict[str, Any] = json.loads(data)
    return parsed


def per_program(port: int, work: list[list[tuple[str, str]]], in_flight: int) -> tuple[float, int]:
    local: dict[int, Any] = {}

    def judge(tests: list[tuple[str, str]]) -> int:
        body = {"code": PROGRAM, "tests": [{"stdin": i, "expected_stdout": o} for i, o in tests]}
        passed: int = post(port, "/v1/execute", body, local)["passed"]
        return passed

    started = time.perf_counter()
    with ThreadPoolExecutor(in_flight) as pool:
        passed = sum(pool.map(judge, work))
    return time.perf_counter() - started, passed


def per_test(
    port: int, work: list[list[tuple[str, str]]], in_flight: int, new_connections: bool = False
) -> tuple[float, int]:
    local: dict[int, Any] = {}
    cases = [case for tests in work for case in tests]

    def judge(case: tuple[str, str]) -> int:
        stdin, expected = case
        body = {"code": PROGRAM, "stdin": stdin, "language": "python", "run_timeout": 10}
        if new_connections:  # verl's call_sandbox_api: requests.post, no session
            answer = requests.post(
                f"http://127.0.0.1:{port}/run_code", json=body, timeout=30
            ).json()
        else:
            answer = post(port, "/run_code", body, local)
        stdout = (answer.get("run_result") or {}).get("stdout") or ""
        ok = answer["status"] == "Success" and stdout.rstrip("\n") == expected.rstrip("\n")
        return int(ok)

    started = time.perf_counter()
    with ThreadPoolExecutor(in_flight) as pool:
        passed = sum(pool.map(judge, cases))
    return time.perf_counter() - started, passed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", type=int, default=40)
    parser.add_argument("--tests", type=int, default=10)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--port", type=int, default=8197)
    args = parser.parse_args()
    settings = ExecutorSettings()
    work = [tests_of(p, args.tests) for p in range(args.programs)]
    total = args.programs * args.tests
    rows = []
    with ServerProcess(settings, args.port):
        post(
            args.port,
            "/v1/execute",
            {"code": PROGRAM, "tests": [{"stdin": "3", "expected_stdout": "5"}]},
            {},
        )
        for _ in range(args.rounds):  # alternate, so drift in the machine's load hits both
            for name, run in (
                ("per program", per_program),
                ("per test", per_test),
                ("per test, verl's client", functools.partial(per_test, new_connections=True)),
            ):
                seconds, passed = run(args.port, work, args.in_flight)
                assert passed == total, (name, passed, total)
                rows.append((name, seconds))
    print(
        f"{args.programs} programs x {args.tests} tests, {args.in_flight} in flight, "
        f"{settings.slots} slots, {os.cpu_count()} CPUs"
    )
    best = {}
    for name, seconds in rows:
        best[name] = min(best.get(name, seconds), seconds)
        print(f"  {name:24s} {seconds:6.2f} s  {total / seconds:7.1f} tests/s")
    for name in ("per test", "per test, verl's client"):
        ratio = best[name] / best["per program"]
        print(f"{name}: {ratio:.2f}x the time of one request per program (best of each)")


if __name__ == "__main__":
    main()
