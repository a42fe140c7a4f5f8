"""Weight loading and the policy version, inside vLLM's own API server process.

vLLM's server takes extra ASGI middleware by import path (`--middleware`); the launcher
passes `cobalt.inference.control.PolicyControlMiddleware`. Running in-process means no
proxy hop on the generation path and direct access to the engine client, so the control
path needs neither vLLM's dev-mode `/collective_rpc` route nor a second port.

The middleware
- answers `GET /v1/policy`, `POST /v1/policy/weights`, `POST /v1/policy/broadcast` (only
  with `COBALT_INFERENCE_WEIGHT_BROADCAST`: the tensors come over a process group from
  the trainer, `worker.py`), `POST /v1/policy/adapter` (only with
  `COBALT_INFERENCE_LORA_MAX_RANK`: a LoRA adapter as the next version, `adapters.py`)
  and `GET /ready` itself (with `COBALT_INFERENCE_CHECKPOINT_DIR`, ready only while it
  serves the trainer's newest published version, which it loads by itself: follow.py);
- stamps every other response with `x-cobalt-policy-version`, and, while an adapter
  serves, points requests for the served name at it (inside the gate, so the adapter
  and the stamped version always agree);
- holds generation requests in a gate: a weight load closes the gate, waits for in-flight
  requests to finish, loads, and reopens it. So the version stamped when a request enters
  is the version of every token it gets back, streaming included.

A failed load (refused by the pre-checks in `checkpoints.py`, an error from vLLM, or a
timeout) is reported to the caller and the previous weights keep serving: after an error
part-way, the worker extension (`worker.py`) loads them back, because vLLM may have
copied some layers already; after a timeout the gate stays closed until the engine
answers and the old weights are back. Only if restoring fails is the server marked
broken: generation then gets 503 rather than mixed weights.
"""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, MutableMapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from prometheus_client import Counter, Gauge, Histogram
from pydantic import BaseModel, ValidationError

from cobalt.inference.adapters import AdapterSlot, adapter_name, adapter_problems
from cobalt.inference.checkpoints import CheckpointError, checkpoint_problems
from cobalt.inference.follow import PolicyFollower
from cobalt.inference.identity import identify
from cobalt.inference.settings import InferenceSettings
from cobalt.shared.checkpoints import read_policy_version
from cobalt.shared.contracts.inference import (
    POLICY_VERSION_HEADER,
    BroadcastWeightsRequest,
    LoadAdapterRequest,
    LoadWeightsRequest,
    LoadWeightsResponse,
    PolicyStatus,
)
from cobalt.shared.weight_delta import (
    DeltaError,
    PolicyChain,
    is_delta_dir,
    newest_full_checkpoint,
    newest_policy,
)

__all__ = ["GenerationGate", "LoadError", "PolicyControlMiddleware", "PolicyController"]

logger = logging.getLogger("cobalt.inference")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

POLICY_PATH = "/v1/policy"
WEIGHTS_PATH = "/v1/policy/weights"
BROADCAST_PATH = "/v1/policy/broadcast"
ADAPTER_PATH = "/v1/policy/adapter"
READY_PATH = "/ready"
_MAX_BODY = 64 << 10

POLICY_VERSION = Gauge(
    "cobalt_policy_version",
    "Policy version of the weights being served.",
    multiprocess_mode="livemax",
)
WEIGHT_LOADS = Counter("cobalt_weight_loads", "Weight loads by outcome.", ["outcome"])
WEIGHT_LOAD_SECONDS = Histogram(
    "cobalt_weight_load_seconds",
    "Seconds a successful weight load took, drain excluded.",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)


class LoadError(Exception):
    """A weight load that did not happen; carries the HTTP status to answer with."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message


class GenerationGate:
    """Many generation requests at once, or one weight load alone."""

    def __init__(self) -> None:
        self._active = 0
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def active(self) -> int:
        return self._active

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    @asynccontextmanager
    async def request(self) -> AsyncIterator[None]:
        while not self._open.is_set():
            await self._open.wait()
        self._active += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    async def close(self, drain_timeout_s: float) -> None:
        """Stop admitting requests and wait (bounded) until none is inside.

        On timeout the gate opens again and LoadError(503) is raised: nothing happened.
        """
        self._open.clear()
        try:
            await asyncio.wait_for(self._idle.wait(), drain_timeout_s)
        except TimeoutError:
            self._open.set()
            raise LoadError(
                503,
                "drain_timeout",
                f"{self._active} request(s) still running after {drain_timeout_s:g} s; "
                "nothing was loaded",
            ) from None

    def open(self) -> None:
        self._open.set()


class PolicyController:
    """The policy version and the weight-load procedure, over a vLLM engine client.

    `engine` needs `collective_rpc(method, kwargs=)` and `reset_prefix_cache()`, which
    vLLM's `EngineClient` has; the unit tests pass a stand-in to drive every outcome.
    """

    def __init__(self, settings: InferenceSettings, engine: Any = None) -> None:
        self.settings = settings
        self.engine = engine
        self.models: Any = None
        """vLLM's serving-models registry (adapter names); set with the engine."""
        self.adapters = AdapterSlot()
        self.gate = GenerationGate()
        self.serving_dir = settings.model_dir().resolve()
        self.version = read_policy_version(self.serving_dir) or 0
        self.weights = identify(self.serving_dir, self.version)
        self.state: str = "serving"
        self.loaded_at = datetime.now(UTC)
        self.loads = 0
        self.failed_loads = 0
        self.last_error: str | None = None
        self._load_lock = asyncio.Lock()
        self._late: asyncio.Task[None] | None = None
        POLICY_VERSION.set(self.version)

    def status(self) -> PolicyStatus:
        return PolicyStatus(
            version=self.version,
            served_name=self.settings.served_model_name(),
            weights_path=str(self.serving_dir),
            state=self.state,  # type: ignore[arg-type]
            loaded_at=self.loaded_at,
            loads=self.loads,
            failed_loads=self.failed_loads,
            last_error=self.last_error,
            weight_broadcast=self.settings.weight_broadcast,
            workers=self.settings.workers(),
            adapter=current.name if (current := self.adapters.current) is not None else None,
            lora_max_rank=self.settings.lora_max_rank,
            weights=self.weights,
        )

    def _target_version(self, request: LoadWeightsRequest | LoadAdapterRequest, path: Path) -> int:
        try:
            recorded = read_policy_version(path)
        except ValueError as exc:
            raise LoadError(422, "invalid_checkpoint", str(exc)) from exc
        version = request.version if request.version is not None else recorded
        if version is None:
            return self.version + 1
        return self._newer(version)

    def _newer(self, version: int) -> int:
        if version <= self.version:
            raise LoadError(
                409,
                "stale_version",
                f"version {version} is not newer than the serving version {self.version}",
            )
        return version

    async def _precheck(self, path: Path) -> None:
        try:
            problems = await asyncio.to_thread(checkpoint_problems, self.serving_dir, path)
        except (CheckpointError, OSError) as exc:
            problems = [str(exc)]
        if problems:
            reason = "checkpoint refused: " + "; ".join(problems)
            self._record_failure("refused", reason)
            raise LoadError(422, "incompatible_checkpoint", reason)

    async def _reload(self, path: Path, fallback: Path) -> dict[str, Any]:
        """Run the worker extension's reload on every worker; merge their outcomes."""
        results = await self.engine.collective_rpc(
            "cobalt_reload_weights",
            kwargs={"weights_path": str(path), "fallback_path": str(fallback)},
        )
        # The prefix cache holds KV computed with the weights before this call.
        await self.engine.reset_prefix_cache()
        return _merge(results)

    async def load(self, request: LoadWeightsRequest) -> LoadWeightsResponse:
        """Load a checkpoint directory (see the module docstring)."""
        self._check_can_load()
        async with self._load_lock:
            path = Path(request.path).resolve()
            version = self._target_version(request, path)
            if is_delta_dir(path):
                return await self._load_delta(path, version)
            return await self._load_full(path, version, check=request.check)

    async def _load_delta(self, path: Path, version: int) -> LoadWeightsResponse:
        """A delta directory: the chain from the newest full checkpoint to it, applied on
        the workers (worker.py); refused with a fall-back when the chain is broken."""
        job_root = path.parent.parent  # <job>/step-<k>/policy
        try:
            chain = await asyncio.to_thread(newest_policy, job_root, upto=version)
            if chain.version != version or chain.deltas[-1:] != (path,):
                raise DeltaError(
                    f"{path} does not end the chain of version {version} under {job_root} "
                    f"(it ends at version {chain.version})"
                )
            await self._precheck(chain.full_dir)
        except (DeltaError, OSError) as exc:
            raise await self._fall_back(job_root, str(exc)) from exc
        source = f"{chain.full_dir} + {len(chain.deltas)} delta(s)"
        try:
            return await self._swap(
                partial(self._apply_chain, chain),
                version=version,
                weights_dir=None,
                source=source,
                described=path,
            )
        except LoadError as exc:
            if exc.status != 422:
                raise
            raise await self._fall_back(job_root, exc.message) from exc

    async def _fall_back(self, job_root: Path, reason: str) -> LoadError:
        """After a refused delta: serve the newest full checkpoint if it is newer than the
        serving version; returns the LoadError (422) to raise, saying what was refused and
        what serves."""
        full = await asyncio.to_thread(newest_full_checkpoint, job_root)
        served = f"still serving version {self.version}"
        if full is not None and full[0] > self.version:
            try:
                await self._load_full(full[1], full[0], check=True)
                served = f"fell back to the newest full checkpoint, version {full[0]}"
            except LoadError as exc:
                served += f" (the newest full checkpoint did not load either: {exc.message})"
        message = f"delta refused: {reason}; {served}"
        self._record_failure("refused", message)
        return LoadError(422, "delta_refused", message)

    async def _apply_chain(self, chain: PolicyChain) -> dict[str, Any]:
        fallback = self.serving_dir
        exact = (read_policy_version(fallback) or 0) == self.version
        results = await self.engine.collective_rpc(
            "cobalt_load_policy",
            kwargs={
                "full_dir": str(chain.full_dir),
                "full_version": chain.full_version,
                "deltas": [str(delta) for delta in chain.deltas],
                "fallback_path": str(fallback) if exact else None,
            },
        )
        await self.engine.reset_prefix_cache()
        return _merge(results)

    async def _load_full(self, path: Path, version: int, *, check: bool) -> LoadWeightsResponse:
        if check:
            await self._precheck(path)
        call = partial(self._reload, path, self.serving_dir)
        commit = None
        if self.adapters.current is not None:  # new base weights: serve them alone
            commit = partial(self.adapters.drop, self.models, self.engine)
        return await self._swap(
            call, version=version, weights_dir=path, source=str(path), commit=commit, described=path
        )

    async def load_adapter(self, request: LoadAdapterRequest) -> LoadWeightsResponse:
        """Serve a LoRA adapter directory over the base weights (adapters.py)."""
        max_rank = self.settings.lora_max_rank
        if max_rank is None:
            raise LoadError(
                409,
                "lora_off",
                "LoRA is off on this server: start it with "
                "COBALT_INFERENCE_LORA_MAX_RANK=16 (at least the adapter's rank), or load "
                f"merged weights with POST {WEIGHTS_PATH}",
            )
        self._check_can_load()
        if self.models is None:
            raise LoadError(503, "not_ready", "vLLM's model registry is not up yet")
        async with self._load_lock:
            path = Path(request.path).resolve()
            version = self._target_version(request, path)
            problems = await asyncio.to_thread(adapter_problems, path, max_rank)
            if problems:
                reason = "adapter refused: " + "; ".join(problems)
                self._record_failure("refused", reason)
                raise LoadError(422, "incompatible_adapter", reason)
            name = adapter_name(self.settings.served_model_name(), version)
            loaded = await self._swap(
                partial(self._add_adapter, name, path),
                version=version,
                weights_dir=None,
                source=str(path),
                described=path,
                commit=partial(self.adapters.commit, self.models, self.engine, name, path),
                undo=partial(self._forget_adapter, name),
            )
            return loaded.model_copy(update={"adapter": name})

    async def _add_adapter(self, name: str, path: Path) -> dict[str, Any]:
        outcome = await self.adapters.load(self.models, name, path)
        if outcome["loaded"]:
            # Prefix-cache blocks were computed with the previous adapter's weights.
            await self.engine.reset_prefix_cache()
        return outcome

    async def _forget_adapter(self, name: str) -> dict[str, Any]:
        """After a timed-out adapter load that completed late: unload it again."""
        await self.adapters.forget(self.models, self.engine, name)
        return {"loaded": True, "broken": False, "error": None}

    async def broadcast(self, request: BroadcastWeightsRequest) -> LoadWeightsResponse:
        """Receive the weights over the trainer's process group (worker.py)."""
        backend = self.settings.weight_broadcast
        if backend is None:
            raise LoadError(
                409,
                "broadcast_off",
                "weight broadcast is off on this server: start it with "
                "COBALT_INFERENCE_WEIGHT_BROADCAST=nccl (gloo on CPUs), or load a checkpoint "
                f"directory with POST {WEIGHTS_PATH}",
            )
        if request.backend != backend:
            raise LoadError(
                422,
                "wrong_backend",
                f"this server receives over {backend}, not {request.backend}; set the "
                f"trainer's COBALT_TRAINER_WEIGHT_BROADCAST={backend}",
            )
        workers = self.settings.workers()
        if request.world_size != workers + 1:
            raise LoadError(
                422,
                "wrong_world_size",
                f"world_size must be {workers + 1}: the trainer plus this server's {workers} "
                "worker(s)",
            )
        self._check_can_load()
        async with self._load_lock:
            version = self._newer(request.version)
            source = f"broadcast from {request.master_address}:{request.master_port}"
            call = partial(self._receive, request)
            return await self._swap(
                call,
                version=version,
                weights_dir=None,
                source=source,
                broadcast_of=(request.job, request.step),
            )

    async def _receive(self, request: BroadcastWeightsRequest) -> dict[str, Any]:
        results = await self.engine.collective_rpc(
            "cobalt_receive_weights", kwargs={"request": request.model_dump()}
        )
        await self.engine.reset_prefix_cache()
        return _merge(results)

    def can_load(self) -> bool:
        """Whether a load could start now (the engine is up, nothing else is loading)."""
        return self.engine is not None and self.state == "serving" and not self._load_lock.locked()

    def _check_can_load(self) -> None:
        if self.engine is None:
            raise LoadError(503, "not_ready", "the engine is not up yet")
        if self.state != "serving" or self._load_lock.locked():
            raise LoadError(
                409 if self.state != "broken" else 503,
                "load_in_progress" if self.state != "broken" else "broken",
                f"cannot load now: server is {self.state}"
                + (f" ({self.last_error})" if self.state == "broken" else ""),
            )

    async def _swap(
        self,
        call: Callable[[], Coroutine[Any, Any, dict[str, Any]]],
        *,
        version: int,
        weights_dir: Path | None,
        source: str,
        described: Path | None = None,
        commit: Callable[[], Coroutine[Any, Any, None]] | None = None,
        undo: Callable[[], Coroutine[Any, Any, dict[str, Any]]] | None = None,
        broadcast_of: tuple[int | None, int | None] = (None, None),
    ) -> LoadWeightsResponse:
        """Drain, run `call` on the workers, and serve `version` if every worker loaded.

        `weights_dir` is the directory the new weights came from (None: a broadcast or an
        adapter; the previous directory stays the one a later failed load restores and
        checks against). `commit` runs after a successful `call`, before the gate opens
        (an adapter load: serve the new adapter, unload the old one); `undo` takes back a
        `call` that completed after its timeout (default: reload the serving weights).
        `described` is the directory `status().weights` names once it serves (None: a
        broadcast); described before the gate closes, so generation does not wait for it.
        `broadcast_of` is the (job, step) a broadcast says its tensors are.
        """
        job, step = broadcast_of
        identity = await asyncio.to_thread(identify, described, version, job=job, step=step)
        drain_started = time.monotonic()
        await self.gate.close(self.settings.drain_timeout_s)
        drained = time.monotonic()
        self.state = "loading"
        rpc = asyncio.ensure_future(call())
        settled_here = True
        try:
            try:
                outcome = await asyncio.wait_for(asyncio.shield(rpc), self.settings.load_timeout_s)
            except TimeoutError:
                settled_here = False
                reason = (
                    f"no answer from the engine within {self.settings.load_timeout_s:g} s; "
                    "the previous weights will be put back when it answers"
                )
                self._record_failure("timeout", reason)
                self._late = asyncio.ensure_future(self._settle_late(rpc, undo))
                raise LoadError(504, "load_timeout", f"weight load failed: {reason}") from None
            except Exception as exc:  # the RPC itself failed: the engine may be gone
                self._mark_broken(f"engine call failed: {_describe(exc)}")
                raise LoadError(
                    500, "load_failed", f"weight load failed: {self.last_error}"
                ) from exc
            if outcome["broken"]:
                self._mark_broken(str(outcome["error"]))
                raise LoadError(500, "load_failed", f"weight load failed: {outcome['error']}")
            if not outcome["loaded"]:
                self.state = "serving"
                reason = (
                    f"vLLM could not load {source}: {outcome['error']}; previous weights restored"
                )
                self._record_failure("failed", reason)
                raise LoadError(422, "load_failed", reason)
            if commit is not None:
                await commit()
            load_s = time.monotonic() - drained
            if weights_dir is not None:
                self.serving_dir = weights_dir
            self.version, self.weights = version, identity
            self.state, self.loaded_at = "serving", datetime.now(UTC)
            self.loads += 1
            self.last_error = None
        finally:
            if settled_here:
                self.gate.open()
        POLICY_VERSION.set(version)
        WEIGHT_LOADS.labels("ok").inc()
        WEIGHT_LOAD_SECONDS.observe(load_s)
        logger.info("policy version %d loaded from %s in %.2f s", version, source, load_s)
        return LoadWeightsResponse(
            version=version, path=source, load_s=load_s, drain_s=drained - drain_started
        )

    async def _settle_late(
        self,
        rpc: asyncio.Future[dict[str, Any]],
        undo: Callable[[], Coroutine[Any, Any, dict[str, Any]]] | None = None,
    ) -> None:
        """After a timeout: wait for the engine, then make sure the old weights serve."""
        try:
            outcome = await rpc
            if outcome["loaded"]:
                # The caller was told the load failed; make that true.
                if undo is not None:
                    outcome = await undo()
                else:
                    outcome = await self._reload(self.serving_dir, self.serving_dir)
                if not outcome["loaded"]:
                    outcome["broken"] = True
            if outcome["broken"]:
                self._mark_broken(str(outcome["error"]))
            else:
                self.state = "serving"
                logger.warning("late weight load settled; previous weights serve again")
        except Exception as exc:
            self._mark_broken(f"engine call failed: {_describe(exc)}")
        finally:
            self.gate.open()

    def _mark_broken(self, reason: str) -> None:
        self.state = "broken"
        self._record_failure("broken", reason)
        logger.critical("weights are inconsistent, refusing generation: %s", reason)

    def _record_failure(self, outcome: str, reason: str) -> None:
        self.failed_loads += 1
        self.last_error = reason
        WEIGHT_LOADS.labels(outcome).inc()
        logger.error("weight load %s: %s", outcome, reason)


def _merge(results: list[Any]) -> dict[str, Any]:
    """Every worker's outcome as one: loaded by all, or broken if any could not restore."""
    outcomes = [r if isinstance(r, dict) else {"loaded": False, "error": repr(r)} for r in results]
    errors = [str(o["error"]) for o in outcomes if o.get("error")]
    return {
        "loaded": bool(outcomes) and all(o.get("loaded") for o in outcomes),
        "broken": any(o.get("restored") is False for o in outcomes),
        "error": errors[0] if errors else None,
    }


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _send_json(
    send: Send, status: int, body: Any, headers: list[tuple[bytes, bytes]]
) -> None:
    payload = json.dumps(body, default=str).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def _error_body(status: int, error_type: str, message: str) -> dict[str, Any]:
    # The same envelope vLLM uses for its own errors, so clients parse one shape.
    return {"error": {"message": message, "type": error_type, "code": status}}


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise LoadError(400, "disconnected", "client went away")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > _MAX_BODY:
            raise LoadError(413, "payload_too_large", f"body over {_MAX_BODY} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


class PolicyControlMiddleware:
    """ASGI middleware added to vLLM's app by `--middleware` (see the module docstring)."""

    def __init__(self, app: ASGIApp, settings: InferenceSettings | None = None) -> None:
        self.app = app
        self.settings = settings or InferenceSettings()
        self.controller = PolicyController(self.settings)
        token = self.settings.control_token or self.settings.api_key
        self._token = token.get_secret_value() if token is not None else None
        self.follower: PolicyFollower | None = None
        """With COBALT_INFERENCE_CHECKPOINT_DIR: keeps this server on the newest published
        policy, and gates /ready on it (follow.py)."""
        if self.settings.checkpoint_dir is not None:
            self.follower = PolicyFollower(self.controller, self.settings.checkpoint_dir)
        self._vllm_app: Any = None
        self._following: asyncio.Task[None] | None = None

    def _start_following(self, scope: Scope) -> None:
        """Start the follower on the server's loop, at the first event that reaches us."""
        if self._vllm_app is None:
            self._vllm_app = scope.get("app")
        if self.follower is None or self._following is not None:
            return

        async def follow(follower: PolicyFollower) -> None:
            while self._engine({"app": self._vllm_app}) is None:
                await asyncio.sleep(self.settings.follow_interval_s)
            await follower.run(self.settings.follow_interval_s)

        self._following = asyncio.ensure_future(follow(self.follower))

    def _engine(self, scope: Scope) -> Any:
        if self.controller.engine is None or self.controller.models is None:
            state = getattr(scope.get("app") or self._vllm_app, "state", None)
            if self.controller.engine is None:
                self.controller.engine = getattr(state, "engine_client", None)
            if self.controller.models is None:
                self.controller.models = getattr(state, "openai_serving_models", None)
        return self.controller.engine

    def _authorized(self, scope: Scope) -> bool:
        if self._token is None:
            return True
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                scheme, _, given = value.decode("latin-1").partition(" ")
                return scheme.lower() == "bearer" and secrets.compare_digest(given, self._token)
        return False

    def _version_header(self) -> tuple[bytes, bytes]:
        return (POLICY_VERSION_HEADER.encode(), str(self.controller.version).encode())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self._start_following(scope)
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, method = scope["path"], scope["method"]
        if path in (POLICY_PATH, WEIGHTS_PATH, BROADCAST_PATH, ADAPTER_PATH, READY_PATH):
            await self._control(scope, receive, send, path, method)
            return
        controller = self.controller
        if controller.state == "broken":
            await _send_json(
                send,
                503,
                _error_body(503, "broken", f"weights are inconsistent: {controller.last_error}"),
                [self._version_header()],
            )
            return
        async with controller.gate.request():
            stamp = self._version_header()
            if controller.adapters.current is not None and method == "POST":
                receive = await _resolved_body(
                    scope, receive, controller.adapters, self.settings.served_model_name()
                )

            async def send_stamped(message: Message) -> None:
                if message["type"] == "http.response.start":
                    message = dict(message)
                    message["headers"] = [*message.get("headers", []), stamp]
                await send(message)

            await self.app(scope, receive, send_stamped)

    async def _control(
        self, scope: Scope, receive: Receive, send: Send, path: str, method: str
    ) -> None:
        stamp = [self._version_header()]
        controller = self.controller
        if path == READY_PATH:
            ready = (
                controller.state == "serving"
                and controller.gate.is_open
                and self._engine(scope) is not None
            )
            body: dict[str, Any] = {
                "ready": ready,
                "state": controller.state,
                "version": controller.version,
            }
            if self.follower is not None:
                # Version-gated: a replica behind the newest published policy is not
                # ready, so nothing routes to it until it has caught up.
                published = self.follower.refresh()
                body["published_version"] = published.version if published else None
                body["ready"] = ready = ready and not self.follower.behind()
            await _send_json(send, 200 if ready else 503, body, stamp)
            return
        if not self._authorized(scope):
            await _send_json(
                send, 401, _error_body(401, "unauthorized", "missing or wrong bearer token"), stamp
            )
            return
        if path == POLICY_PATH and method == "GET":
            await _send_json(send, 200, controller.status().model_dump(mode="json"), stamp)
            return
        if path in (WEIGHTS_PATH, BROADCAST_PATH, ADAPTER_PATH) and method == "POST":
            try:
                raw = await _read_body(receive)
                self._engine(scope)
                if path == WEIGHTS_PATH:
                    result = await controller.load(_parse(LoadWeightsRequest, raw))
                elif path == ADAPTER_PATH:
                    result = await controller.load_adapter(_parse(LoadAdapterRequest, raw))
                else:
                    result = await controller.broadcast(_parse(BroadcastWeightsRequest, raw))
            except LoadError as exc:
                await _send_json(
                    send,
                    exc.status,
                    _error_body(exc.status, exc.error_type, exc.message),
                    [self._version_header()],
                )
                return
            await _send_json(send, 200, result.model_dump(mode="json"), [self._version_header()])
            return
        await _send_json(
            send, 405, _error_body(405, "method_not_allowed", f"{method} {path}"), stamp
        )


async def _resolved_body(
    scope: Scope, receive: Receive, adapters: AdapterSlot, served_name: str
) -> Receive:
    """`receive` of a request whose body asks for the served name rewritten to ask for the
    current adapter (adapters.py); the whole body is read first (generation requests are
    small JSON documents)."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return _replay([message])
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    raw = b"".join(chunks)
    body = adapters.resolve(raw, served_name)
    if body is not raw:
        headers = [(k, v) for k, v in scope.get("headers", []) if k != b"content-length"]
        scope["headers"] = [*headers, (b"content-length", str(len(body)).encode())]
    return _replay([{"type": "http.request", "body": body, "more_body": False}], receive)


def _replay(messages: list[Message], then: Receive | None = None) -> Receive:
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        if then is None:
            return {"type": "http.disconnect"}
        return await then()

    return receive


Request = TypeVar("Request", bound=BaseModel)


def _parse(contract: type[Request], raw: bytes) -> Request:
    try:
        return contract.model_validate_json(raw)
    except ValidationError as exc:
        raise LoadError(
            422, "invalid_request", "bad load request: " + _validation_summary(exc)
        ) from exc


def _validation_summary(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in error['loc']) or 'body'}: {error['msg']}"
        for error in exc.errors()
    )
