"""The executor's request path against the real server (`cobalt executor serve` in a
subprocess, with a token): every route that takes a body checks the token before reading
it, cuts a dripped body at a total deadline, bounds its fields, stops the work of a client
that went away, and keeps the server's memory and its responses within their caps.

Memory is measured on the server's own processes (its resident set and its peak, from
/proc), with bounds that the earlier behaviour broke by far: results held until every
test ended, a 28 MiB invalid body decoded into ~700 MiB in the server.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.serving import executor_process

TOKEN = "request-path-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RESPONSE_BYTES = 200_000
BODY_ROUTES = ["/v1/execute", "/v1/execute/batch", "/run_code"]
MIB = 1 << 20


class Server:
    def __init__(self, process: subprocess.Popen[bytes], url: str, log: Path) -> None:
        self.process = process
        self.url = url
        self.port = int(url.rsplit(":", 1)[1])
        self.log = log

    def processes(self) -> list[int]:
        """The server and every process below it (parser processes, sandboxes)."""
        found, pending = [], [self.process.pid]
        while pending:
            pid = pending.pop()
            found.append(pid)
            try:  # each thread's children: the parsers' fork server comes from a thread
                tasks = list(Path(f"/proc/{pid}/task").iterdir())
                children = [c for t in tasks for c in (t / "children").read_text().split()]
            except OSError:
                continue
            pending += [int(child) for child in children]
        return found

    def status_kb(self, field: str, pid: int | None = None) -> int:
        for line in Path(f"/proc/{pid or self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1])
        return 0

    def parser_processes(self) -> list[int]:
        """The body parsers (and their fork server)."""
        found = []
        for pid in self.processes():
            try:
                if b"forkserver" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
            except OSError:
                continue
        return found

    def tree_rss_mib(self) -> float:
        """Resident memory of the server's own Python processes (not the sandboxes', whose
        interpreters are outside this question)."""
        total = 0
        for pid in self.processes():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"bwrap" in cmdline or b"_zygote" in cmdline or b"/usr/bin/python3" in cmdline:
                continue
            try:
                total += self.status_kb("VmRSS", pid)
            except OSError:
                continue
        return total / 1024


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    settings = {
        "COBALT_EXECUTOR_SLOTS": "2",
        "COBALT_EXECUTOR_AUTH_TOKEN": TOKEN,
        "COBALT_EXECUTOR_BODY_TIMEOUT_S": "3",
        "COBALT_EXECUTOR_BODY_DEADLINE_S": "4",
        "COBALT_EXECUTOR_MAX_RESPONSE_BYTES": str(RESPONSE_BYTES),
    }
    log = tmp_path_factory.mktemp("request-path") / "server.log"
    with executor_process(settings, log) as (process, url):
        yield Server(process, url, log)


def _head(route: str, *, token: bool, length: int | None) -> bytes:
    lines = [f"POST {route} HTTP/1.1", "Host: test", "Content-Type: application/json"]
    if token:
        lines.append(f"Authorization: Bearer {TOKEN}")
    lines.append(
        f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    )
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of one response (read until the server closes)."""
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize("route", BODY_ROUTES)
@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_a_request_without_the_token_is_refused_before_its_body_is_read(
    server: Server, route: str, framing: str
) -> None:
    # A 25 MiB body is announced (or streamed) and never sent: the 401 must come anyway,
    # and the connection is closed rather than left to receive the rest.
    with socket.create_connection(("127.0.0.1", server.port), timeout=20) as sock:
        length = 25 * MIB if framing == "content-length" else None
        sock.sendall(_head(route, token=False, length=length))
        if framing == "chunked":
            sock.sendall(b"1\r\n{\r\n")
        status, headers, body = _read_response(sock)
    assert status == 401, body[:300]
    assert json.loads(body)["error"]["type"] == "unauthorized"
    assert headers.get("connection") == "close"


@pytest.mark.parametrize("route", BODY_ROUTES)
def test_a_dripped_body_is_cut_at_the_total_deadline(server: Server, route: str) -> None:
    # One byte a second, each well within the 3 s per-piece timeout: only the 4 s total
    # deadline can stop it, long before the 40 bytes are all sent.
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(_head(route, token=True, length=40))
        sock.settimeout(1.0)
        answered = b""
        for byte in b'{"code": "print(1)", "tests": []}' + b" " * 6:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            try:
                answered = sock.recv(65536)
            except TimeoutError:
                continue
            break
        assert answered, "the server kept waiting for the dripped body"
        sock.settimeout(5)
        status, _, body = _read_response_from(answered, sock)
    assert status == 408, body[:300]
    assert json.loads(body)["error"]["type"] == "body_timeout"


def _read_response_from(first: bytes, sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    class _Prefixed:
        def __init__(self) -> None:
            self.pending = first

        def recv(self, size: int) -> bytes:
            if self.pending:
                data, self.pending = self.pending, b""
                return data
            return sock.recv(size)

    return _read_response(_Prefixed())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("code", "x" * (4 * MIB + 1), "code"),
        ("stdin", "y" * (16 * MIB + 1), "stdin"),
        ("language", "p" * 100_000, "language"),
        ("files", {f"f{i}": "" for i in range(1000)}, "files"),
        ("memory_limit_MB", 1 << 40, "memory_limit_MB"),
    ],
)
def test_run_code_refuses_oversized_fields_with_a_4xx_naming_them(
    server: Server, field: str, value: object, named: str
) -> None:
    body = {"code": "print(1)", field: value}
    response = httpx.post(f"{server.url}/run_code", json=body, headers=AUTH, timeout=60)
    assert response.status_code == 422, response.text[:300]
    assert response.json()["error"]["message"].startswith(named)


@pytest.mark.parametrize("route", BODY_ROUTES)
def test_a_client_that_goes_away_stops_its_running_program(server: Server, route: str) -> None:
    # The program would sleep for 50 s; its client leaves once it runs. The slot must be
    # free again long before the program could have ended by itself.
    program = "import time\ntime.sleep(50)\n"
    test = {"stdin": "", "expected_stdout": ""}
    one = {"code": program, "tests": [test], "limits": {"wall_s": 55}}
    body = {
        "/v1/execute": one,
        "/v1/execute/batch": {"requests": [one]},
        "/run_code": {"code": program, "run_timeout": 55},
    }[route]
    payload = json.dumps(body).encode()
    with httpx.Client(base_url=server.url, timeout=10) as client:
        assert _until(lambda: _busy_slots(client) == 0, 30)
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(_head(route, token=True, length=len(payload)) + payload)
            assert _until(lambda: _busy_slots(client) == 1, 20), "the program never started"
        assert _until(lambda: _busy_slots(client) == 0, 20), "the abandoned program kept its slot"


def test_deeply_nested_json_anywhere_in_a_big_body_is_a_4xx(server: Server) -> None:
    # Over 1 MiB (the parser-process path), a deep value in an unknown field and in a
    # call test's arguments: a 4xx with a message, never a 500.
    deep = "[" * 50_000 + "]" * 50_000
    padding = "#" * (1200 << 10)
    bodies = [
        f'{{"code": "{padding}", "tests": [{{"stdin": "", "expected_stdout": ""}}], '
        f'"unknown": {deep}}}',
        f'{{"code": "{padding}", "tests": [{{"fn_name": "f", "args": {deep}, "expected": 1}}]}}',
        f'{{"code": "{padding}", "junk": {"[" * 500 + "]" * 500}}}',
    ]
    for route in BODY_ROUTES:
        for text in bodies:
            response = httpx.post(
                f"{server.url}{route}",
                content=text.encode(),
                headers={**AUTH, "content-type": "application/json"},
                timeout=60,
            )
            assert 400 <= response.status_code < 500 or response.status_code == 200, (
                route,
                response.status_code,
                response.text[:300],
            )
            assert response.status_code != 200 or route == "/run_code"
    assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_a_big_invalid_body_does_not_blow_up_the_servers_memory(server: Server) -> None:
    # 28 MiB of empty lists in an unknown field decodes into ~9 million Python lists. The
    # server once got them back with the validation error (~700 MiB more at its peak),
    # then a parser process decoded them (~900 MiB) before validation refused the field;
    # now the unknown field is refused before its value is decoded.
    count = (28 * MIB) // 3
    body = (
        b'{"code": "x", "tests": [{"stdin": "", "expected_stdout": "", "junk": ['
        + b"[]," * count
        + b"[]]}]}"
    )
    peak_before = server.status_kb("VmHWM") / 1024
    response = httpx.post(
        f"{server.url}/v1/execute",
        content=body,
        headers={**AUTH, "content-type": "application/json"},
        timeout=120,
    )
    assert response.status_code == 422, response.text[:300]
    assert "junk" in response.json()["error"]["message"]
    assert len(response.content) < 10_000  # the first errors, without their input
    del body
    peak_growth = server.status_kb("VmHWM") / 1024 - peak_before
    assert peak_growth < 150, f"the server's peak grew by {peak_growth:.0f} MiB"
    parser_peak = max(server.status_kb("VmHWM", pid) for pid in server.parser_processes()) / 1024
    assert parser_peak < 150, f"a parser process's peak reached {parser_peak:.0f} MiB"
    # The parser process that decoded it is replaced: nothing stays with the server.
    deadline = time.monotonic() + 20
    while server.tree_rss_mib() > 600 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert server.tree_rss_mib() < 600


def test_a_body_of_millions_of_values_where_any_value_goes_is_bounded(server: Server) -> None:
    # A call test's arguments take any JSON value, so they are decoded before the model
    # can count them: 28 MiB of empty lists there is ~9 million lists. The parser
    # process's memory limit refuses the body instead (a 4xx), the server stays small.
    count = (28 * MIB) // 3
    body = b'{"code": "x", "tests": [{"fn_name": "f", "expected": 1, "args": [' + b"[]," * count
    body += b"[]]}]}"
    peak_before = server.status_kb("VmHWM") / 1024
    response = httpx.post(
        f"{server.url}/v1/execute",
        content=body,
        headers={**AUTH, "content-type": "application/json"},
        timeout=120,
    )
    assert response.status_code in (400, 413, 422), response.text[:300]
    assert "too many values" in response.json()["error"]["message"]
    del body
    assert server.status_kb("VmHWM") / 1024 - peak_before < 150
    # (The parser that refused it may already be gone, replaced for its size.)
    parsers = server.parser_processes()
    parser_peak = max(server.status_kb("VmHWM", pid) for pid in parsers) / 1024
    assert parser_peak < 700, f"a parser process's peak reached {parser_peak:.0f} MiB"
    assert httpx.get(f"{server.url}/healthz").status_code == 200


def test_results_are_capped_as_tests_end_so_memory_stays_bounded(server: Server) -> None:
    # 300 tests each print 1 MiB, asking for all of it back: 300 MiB held in the server
    # before the cap once applied (at the end). Capped as each test ends, the response
    # never holds more than its byte budget.
    request = {
        "code": "import sys\nsys.stdout.write('x' * (1 << 20))\n",
        "tests": [{"stdin": "", "expected_stdout": "x"}] * 300,
        "stream_chars": 2 << 20,
        "limits": {"output_kb": 2048},
    }
    peak_before = server.status_kb("VmHWM") / 1024
    response = httpx.post(f"{server.url}/v1/execute", json=request, headers=AUTH, timeout=300)
    assert response.status_code == 200, response.text[:300]
    results = response.json()["results"]
    assert [r["verdict"] for r in results] == ["wrong_answer"] * 300
    peak_growth = server.status_kb("VmHWM") / 1024 - peak_before
    assert peak_growth < 150, f"the server's peak grew by {peak_growth:.0f} MiB"
    # The budget, plus each test's fixed fields.
    assert len(response.content) < RESPONSE_BYTES + 300 * 400


@pytest.mark.parametrize("route", ["/v1/execute", "/run_code"])
def test_the_response_cap_counts_bytes_as_sent(server: Server, route: str) -> None:
    # A control byte is six bytes in JSON (\u0001): a cap in characters let a 234-byte
    # request produce a 191 MiB response.
    program = (
        "import sys\nsys.stdout.write('\\x01' * (1 << 20))\nsys.stderr.write('\\x02' * 60000)\n"
    )
    body = (
        {
            "code": program,
            "tests": [{"stdin": "", "expected_stdout": ""}] * 4,
            "stream_chars": 2 << 20,
            "feedback_chars": 100_000,
            "limits": {"output_kb": 2048},
        }
        if route == "/v1/execute"
        else {"code": program}
    )
    response = httpx.post(f"{server.url}{route}", json=body, headers=AUTH, timeout=120)
    assert response.status_code == 200, response.text[:300]
    assert len(response.content) <= RESPONSE_BYTES + 4 * 400
    text = response.json()
    outputs = (
        [r["stdout"] for r in text["results"]]
        if route == "/v1/execute"
        else [text["run_result"]["stdout"]]
    )
    assert all("\x01" in out and "omitted" in out for out in outputs)


def _busy_slots(client: httpx.Client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("cobalt_executor_busy_slots "):
            return float(line.split()[1])
    raise AssertionError("no busy-slots gauge in /metrics")


def _until(condition: Callable[[], bool], within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("route", ["/v1/execute", "/run_code"])
def test_a_client_that_goes_away_stops_its_program_in_both_uid_modes(
    executor_http: httpx.Client, route: str
) -> None:
    program = "import time\ntime.sleep(50)\n"
    body = (
        {"code": program, "tests": [{"stdin": "", "expected_stdout": ""}], "limits": {"wall_s": 55}}
        if route == "/v1/execute"
        else {"code": program, "run_timeout": 55}
    )
    payload = json.dumps(body).encode()
    url = executor_http.base_url
    assert _until(lambda: _busy_slots(executor_http) == 0, 30)
    with socket.create_connection((url.host, url.port), timeout=10) as sock:
        head = f"POST {route} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        sock.sendall(f"{head}Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
        assert _until(lambda: _busy_slots(executor_http) == 1, 20), "it never started"
    assert _until(lambda: _busy_slots(executor_http) == 0, 20), "the program kept its slot"
