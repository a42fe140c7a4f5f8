"""Fault injection for the chaos suite (tests/chaos): each fault is something a deployment
meets (a process killed, a server restarted or emptied, a dependency refusing or answering
errors for a while), injected into instances the test itself started, never the shared
PostgreSQL or Redis other tests use.

- `PrivateRedis`: a redis-server of the test's own, restarted with its data or empty.
- `TcpFaultProxy`: a TCP proxy (in front of PostgreSQL) that drops every open connection
  (a restart: transactions cut mid-way) and refuses new ones for a while (unreachable).
- `HttpFaultProxy`: an HTTP proxy (in front of the executor or inference) that answers a
  chosen status (503, 429) for a while, then forwards again; with its target down it
  answers as a gateway does (503 when the target refused, 502 when it was cut).
- `stall`: SIGSTOP a process group for longer than its clients' timeouts, then SIGCONT.
- `ChaosDeployment` (`chaos_deployment`): the parts both chaos tests break, started
  behind those proxies (`cobalt executor serve`, `cobalt orchestrator serve`, two
  `cobalt worker` processes, a worker that exits started again as a restart policy
  would), and `faults`, how each kind is injected into them.
- `FaultLog`: when each fault was injected and when the job next made progress.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import statistics
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy.engine import make_url
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route

from cobalt.shared.ports import free_port
from tests.support.runs import cobalt_process, worker
from tests.support.serving import serve_asgi

SHARED_KINDS = [
    "worker-kill",
    "redis-restart",
    "redis-restart-empty",
    "model-503",
    "model-429",
    "executor-503",
    "executor-stall",
    "postgres-drop",
    "postgres-unreachable",
    "api-kill",
    "executor-kill",
]
"""The fault kinds `ChaosDeployment.faults` injects (a test adds its own, trainer-kill)."""


def answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


def ready(url: str) -> bool:
    """Whether `url` (a readiness path) answers 200 now."""
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.TransportError:
        return False


class PrivateRedis:
    """A redis-server on a port and directory of its own (RDB snapshots on shutdown, so a
    plain restart keeps the queue; an empty restart deletes the snapshot first)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None
        directory.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port),
             "--dir", str(self.directory), "--dbfilename", "dump.rdb", "--save", "",
             "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not answers(self.port):
            assert self.process.poll() is None, "redis-server exited"
            assert time.monotonic() < deadline, "redis-server did not answer"
            time.sleep(0.05)

    def stop(self, *, keep_data: bool) -> None:
        """SHUTDOWN SAVE (the data survives) or a kill -9 with the snapshot deleted."""
        assert self.process is not None
        if keep_data:
            from redis import Redis

            try:
                Redis.from_url(self.url).shutdown(save=True)
            except Exception:  # noqa: BLE001  the connection closes as the server exits
                pass
        else:
            os.killpg(self.process.pid, signal.SIGKILL)
            (self.directory / "dump.rdb").unlink(missing_ok=True)
        self.process.wait(timeout=30)

    def restart(self, *, empty: bool) -> None:
        self.stop(keep_data=not empty)
        self.start()

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)


class TcpFaultProxy:
    """Forwards 127.0.0.1:port to `target_port`; `drop_all` cuts every connection (each
    side sees a reset, as when the server restarts) and `refuse_for` closes new ones."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.refuse_until = 0.0
        self.open: set[socket.socket] = set()
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if time.monotonic() < self.refuse_until:
                client.close()
                continue
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            with self.lock:
                self.open |= {client, upstream}
            finished = threading.Semaphore(0)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b, finished), daemon=True).start()
            threading.Thread(
                target=self._reap, args=(client, upstream, finished), daemon=True
            ).start()

    def _pipe(
        self, source: socket.socket, sink: socket.socket, finished: threading.Semaphore
    ) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                self._shut(sock)
            finished.release()

    def _reap(
        self, client: socket.socket, upstream: socket.socket, finished: threading.Semaphore
    ) -> None:
        """Close both sockets once both pipes are done: a socket closed while another
        thread still reads it frees its descriptor for the next connection to reuse, and
        that thread would then read the new connection's bytes."""
        finished.acquire()
        finished.acquire()
        with self.lock:
            self.open -= {client, upstream}
        client.close()
        upstream.close()

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def drop_all(self) -> None:
        with self.lock:
            opened = list(self.open)
        for sock in opened:
            self._shut(sock)  # the pipes see the cut and close them

    def refuse_for(self, seconds: float) -> None:
        self.refuse_until = time.monotonic() + seconds
        self.drop_all()

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.drop_all()


@dataclass
class HttpFaultProxy:
    """Forwards every request to `target`, except while `fail_for` is in force: then it
    answers `status` (503, 429 with Retry-After) without forwarding."""

    target: str
    failing_until: float = 0.0
    status: int = 503
    failed: int = 0
    forwarded: int = 0
    """Requests passed on to `target` so far."""

    def fail_for(self, seconds: float, status: int) -> None:
        self.status = status
        self.failing_until = time.monotonic() + seconds

    def app(self) -> Starlette:
        """The proxy's app; its client to `target` lives as long as the server (lifespan),
        so its connections close with it instead of at garbage collection."""
        client: httpx.AsyncClient | None = None

        @asynccontextmanager
        async def lifespan(_app: Starlette) -> AsyncIterator[None]:
            nonlocal client
            async with httpx.AsyncClient(base_url=self.target, timeout=None) as client:
                yield

        async def forward(request: Request) -> Response:
            assert client is not None
            if time.monotonic() < self.failing_until:
                self.failed += 1
                headers = {"Retry-After": "1"} if self.status == 429 else {}
                return Response(b'{"detail": "injected fault"}', self.status, headers)
            self.forwarded += 1
            try:
                body = await request.body()
            except ClientDisconnect:  # the client gave up (its timeout) before sending it all
                return Response(b"", 499)
            try:
                upstream = await client.request(
                    request.method, request.url.path, params=request.query_params,
                    content=body,
                    headers={k: v for k, v in request.headers.items() if k != "host"},
                )  # fmt: skip
            except httpx.ConnectError:  # the target is down: nothing was sent
                return Response(b'{"detail": "no upstream"}', 503)
            except httpx.TransportError:  # cut mid-request: it may have run
                return Response(b'{"detail": "upstream failed"}', 502)
            drop = {"content-length", "transfer-encoding", "content-encoding", "connection"}
            headers = {k: v for k, v in upstream.headers.items() if k.lower() not in drop}
            return Response(upstream.content, upstream.status_code, headers)

        methods = ["GET", "POST", "PUT", "DELETE", "PATCH"]
        return Starlette(
            routes=[Route("/{path:path}", forward, methods=methods)], lifespan=lifespan
        )


@contextmanager
def serve_http_proxy(target: str) -> Iterator[tuple[HttpFaultProxy, str]]:
    """An `HttpFaultProxy` to `target` served on a free port; yields it and its URL (with
    `target`'s path, e.g. /v1, kept)."""
    parsed = httpx.URL(target)
    proxy = HttpFaultProxy(target=str(parsed.copy_with(path="/")).rstrip("/"))
    with serve_asgi(proxy.app()) as url:
        yield proxy, url + parsed.path.rstrip("/")


def stall(pid: int, seconds: float) -> None:
    """SIGSTOP the process group `pid` leads for `seconds`, then SIGCONT."""
    os.killpg(pid, signal.SIGSTOP)
    try:
        time.sleep(seconds)
    finally:
        os.killpg(pid, signal.SIGCONT)


def kill_9(process: subprocess.Popen[Any]) -> None:
    """kill -9 the process group `process` leads and reap it."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.communicate(timeout=30)


@dataclass
class FaultLog:
    """Each injected fault's kind and the seconds from it to the job's next progress."""

    recovered_s: dict[str, list[float]] = field(default_factory=dict)

    def record(self, kind: str, seconds: float) -> None:
        self.recovered_s.setdefault(kind, []).append(seconds)

    def table(self) -> str:
        lines = ["kind                 injected  survived  p50_s   max_s"]
        for kind, times in sorted(self.recovered_s.items()):
            lines.append(
                f"{kind:<20} {len(times):>8}  {len(times):>8}  "
                f"{statistics.median(times):6.1f}  {max(times):6.1f}"
            )
        return "\n".join(lines)


def fault_sequence(kinds: list[str], count: int, seed: int | None) -> list[str]:
    """Every kind once, in order (seed None), or `count` kinds drawn from a seed."""
    if seed is None:
        return list(kinds)
    draw = random.Random(seed)
    return [draw.choice(kinds) for _ in range(count)]


def wait_until(
    done: Callable[[], bool], timeout_s: float, what: str, logs: Path | None = None
) -> None:
    """Poll `done` until it holds; past `timeout_s` fail, showing the end of every process's
    log under `logs` (a CI run keeps nothing else to read the cause from)."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"no {what} within {timeout_s} s" + log_tails(logs)
        time.sleep(0.1)


def log_tails(logs: Path | None, lines: int = 30) -> str:
    """The last `lines` lines of each *.log under `logs`, for a failure's message."""
    if logs is None:
        return ""
    shown = []
    for log in sorted(logs.glob("*.log")):
        tail = log.read_text(errors="replace").splitlines()[-lines:]
        shown.append(f"\n--- {log.name} (last {len(tail)} lines)\n" + "\n".join(tail))
    return "".join(shown)


@dataclass
class ChaosDeployment:
    """A deployment of the test's own, every part behind a fault proxy: PostgreSQL (TCP),
    the executor and the model (HTTP), a private Redis; `cobalt executor serve`,
    `cobalt orchestrator serve` and `cobalt worker` processes started on them, each one's
    output appended to a file under `logs`. Every process it started is in `processes`."""

    logs: Path
    base_env: dict[str, str]
    """The test's environment without any COBALT_ variable."""
    services: dict[str, str]
    """What the API and workers run with: the proxies' and the private Redis's URLs."""
    redis: PrivateRedis
    postgres: TcpFaultProxy
    model: HttpFaultProxy
    executor: HttpFaultProxy
    executor_port: int
    executor_timeout_s: float
    url: str
    """The orchestrator API's base URL."""
    model_url: str
    """The model's URL behind its proxy (up to /v1), for the job's requests."""
    workers: list[subprocess.Popen[str]] = field(default_factory=list)
    """The workers started and not killed since."""
    apis: list[subprocess.Popen[str]] = field(default_factory=list)
    executors: list[subprocess.Popen[str]] = field(default_factory=list)
    processes: list[subprocess.Popen[str]] = field(default_factory=list)
    """Every process started, the killed ones included."""
    workers_lock: threading.Lock = field(default_factory=threading.Lock)
    closing: threading.Event = field(default_factory=threading.Event)

    def start_executor(self) -> None:
        """`cobalt executor serve` on the deployment's port, once its sandboxes are ready."""
        started = cobalt_process(
            self.base_env, "executor", "serve", "--port", str(self.executor_port),
            "--slots", "2", log=self.logs / "executor.log",
        )  # fmt: skip
        self.executors.append(started)
        self.processes.append(started)
        wait_until(lambda: ready(f"http://127.0.0.1:{self.executor_port}/readyz"), 90, "executor")

    def start_worker(self) -> subprocess.Popen[str]:
        started = worker(self.services, log=self.logs / "workers.log")
        self.workers.append(started)
        self.processes.append(started)
        return started

    def restart_exited_workers(self) -> None:
        """A restart policy's work (compose's `restart:`, a Deployment), in a thread until
        the deployment closes: a worker that exited (`cobalt worker` exits 3 when it starts
        while the executor is not ready) is started again."""
        while not self.closing.wait(0.5):
            with self.workers_lock:
                for exited in [w for w in self.workers if w.poll() is not None]:
                    self.workers.remove(exited)
                    self.start_worker()

    def start_api(self) -> None:
        """`cobalt orchestrator serve` on the deployment's port, once it answers."""
        port = self.url.rsplit(":", 1)[1]
        started = cobalt_process(
            self.services, "orchestrator", "serve", "--port", port, log=self.logs / "api.log"
        )
        self.apis.append(started)
        self.processes.append(started)
        wait_until(lambda: answers(int(port)), 60, "orchestrator API")

    def faults(self, progress: Callable[[], int]) -> dict[str, Callable[[], None]]:
        """How each of `SHARED_KINDS` is injected; `progress` counts the job's progress
        (executor-stall waits for a judgement in flight, or progress, before it stalls)."""

        def restart_worker() -> None:
            with self.workers_lock:
                kill_9(self.workers.pop(0))
                self.start_worker()

        def restart_executor() -> None:
            kill_9(self.executors[-1])
            self.start_executor()

        def stall_executor() -> None:
            """Stop the executor past its clients' timeout, once a judgement is in flight
            (or the job moved on without one: the judgements were done)."""
            seen, before = self.executor.forwarded, progress()
            wait_until(
                lambda: self.executor.forwarded > seen or progress() > before, 60, "a judgement"
            )
            stall(self.executors[-1].pid, self.executor_timeout_s + 2)

        def restart_api() -> None:
            kill_9(self.apis[-1])
            self.start_api()

        return {
            "worker-kill": restart_worker,
            "redis-restart": lambda: self.redis.restart(empty=False),
            "redis-restart-empty": lambda: self.redis.restart(empty=True),
            "model-503": lambda: self.model.fail_for(3, 503),
            "model-429": lambda: self.model.fail_for(3, 429),
            "executor-503": lambda: self.executor.fail_for(3, 503),
            "executor-stall": stall_executor,
            "postgres-drop": self.postgres.drop_all,
            "postgres-unreachable": lambda: self.postgres.refuse_for(3),
            "api-kill": restart_api,
            "executor-kill": restart_executor,
        }


@contextmanager
def chaos_deployment(
    database: str,
    model_url: str,
    tmp_path: Path,
    *,
    executor_timeout_s: float,
    settings: dict[str, str] | None = None,
) -> Iterator[ChaosDeployment]:
    """A `ChaosDeployment` on `database` (its PostgreSQL behind the TCP proxy) and the model
    at `model_url` (behind an HTTP proxy), with the executor, two workers and the API
    started; `settings` adds COBALT_ variables for the API and workers. Every process it
    started is killed (-9) and reaped on the way out, Redis and the proxies closed."""
    logs = tmp_path / "logs"
    logs.mkdir(exist_ok=True)
    redis = PrivateRedis(tmp_path / "redis")
    redis.start()
    postgres = TcpFaultProxy(make_url(database).port or 5432)
    proxied_db = make_url(database).set(port=postgres.port).render_as_string(hide_password=False)
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    executor_port = free_port()
    deployment: ChaosDeployment | None = None
    try:
        with (
            serve_http_proxy(model_url) as (model, proxied_model),
            serve_http_proxy(f"http://127.0.0.1:{executor_port}") as (executor, proxied_executor),
        ):
            services = {**base_env, "COBALT_DATABASE_URL": proxied_db,
                        "COBALT_EXECUTOR_URL": proxied_executor,
                        "COBALT_EXECUTOR_CLIENT_TIMEOUT_S": str(executor_timeout_s),
                        "COBALT_REDIS_URL": redis.url, **(settings or {})}  # fmt: skip
            deployment = ChaosDeployment(
                logs=logs, base_env=base_env, services=services, redis=redis,
                postgres=postgres, model=model, executor=executor,
                executor_port=executor_port, executor_timeout_s=executor_timeout_s,
                url=f"http://127.0.0.1:{free_port()}", model_url=proxied_model,
            )  # fmt: skip
            deployment.start_executor()
            deployment.start_worker()
            deployment.start_worker()
            threading.Thread(target=deployment.restart_exited_workers, daemon=True).start()
            deployment.start_api()
            yield deployment
    finally:
        if deployment is not None:
            deployment.closing.set()
            with deployment.workers_lock:
                for process in deployment.processes:
                    kill_9(process)
        postgres.close()
        redis.close()
