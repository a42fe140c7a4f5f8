"""Request bodies, read and validated off the event loop.

FastAPI parses a JSON body and validates it on the event loop; a body of tens of MiB then
holds every other request (health probes included) for seconds. Here the body is read
(its size and time are capped by `RequestBodyGuard`) and decoded with the executor's JSON
rules (`values.loads_value`: integers of any length, no stack overflow on deep nesting)
and validated elsewhere: small bodies on a worker thread, big ones in parser processes.
A thread is not enough for big bodies: decoding one long JSON string is a single C call
that holds the GIL throughout (about 40 ms per MiB of escaped text on these machines),
so a 20 MiB body froze the event loop, and `/healthz` with it, for most of a second.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import multiprocessing
import os
import pickle
import resource
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

from cobalt.executor.errors import ClientDisconnected
from cobalt.executor.shapes import Refused, Shape, decode_shaped, shape_of
from cobalt.executor.values import loads_value
from cobalt.shared.errors import InvalidInput
from cobalt.shared.http import validation_detail

__all__ = [
    "INLINE_PARSE_BYTES",
    "PROCESS_PARSE_BYTES",
    "SMALL_LANE_BYTES",
    "BodyParser",
    "add_body_schemas",
    "openapi_body",
    "parse_body",
    "read_body",
]

logger = logging.getLogger(__name__)

Model = TypeVar("Model", bound=BaseModel)

INLINE_PARSE_BYTES = 64 << 10
"""Bodies up to this size are parsed on the event loop: well under a millisecond, less
than the hop to a worker thread would cost."""


def parse_body(body: bytes, model: type[Model]) -> Model:
    """Decode and validate one JSON body; one over `INLINE_PARSE_BYTES` is decoded in the
    shape of `model` (`shapes.decode_shaped`), so an invalid one is refused before its
    values are built.

    Raises:
        InvalidInput: the body is not JSON (or is nested too deeply to decode).
        RequestValidationError: the JSON does not fit `model`.
    """
    try:
        if len(body) <= INLINE_PARSE_BYTES:
            data = loads_value(body)
        else:
            data = decode_shaped(_text(body), _shape(model))
    except Refused as exc:
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in exc.errors]
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the request body is not valid JSON: {str(exc)[:200]}") from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        # Without inputs: a body's worth of objects would otherwise travel with the error.
        found = exc.errors(include_url=False, include_input=False, include_context=False)
        errors = [{**error, "loc": ("body", *error["loc"])} for error in found]
        raise RequestValidationError(errors) from exc
    except RecursionError as exc:
        raise InvalidInput("the request body is nested too deeply") from exc


@functools.cache
def _shape(model: type[BaseModel]) -> Shape:
    return shape_of(model)


def _text(body: bytes) -> str:
    # As json.loads reads bytes: UTF-8, -16 or -32, told apart by the first bytes.
    return body.decode(json.detect_encoding(body), "surrogatepass")


PROCESS_PARSE_BYTES = 1 << 20
"""Bodies over this are parsed in a parser process; below it, the GIL is held for tens
of milliseconds at most, less than the round trip to another process costs."""

PARSER_PROCESSES = 2
"""Parser processes for the biggest bodies: one does not queue every other behind it."""

SMALL_LANE_BYTES = 8 << 20
"""Bodies up to this size (over `PROCESS_PARSE_BYTES`) are parsed in a parser process of
their own lane, never behind bigger ones: two 30 MB bodies that were then refused once
held a 1.5 MiB request for 20 s."""

RECYCLE_PARSER_BYTES = 256 << 20
"""A parser process whose memory grew past this (a body of millions of tiny values
decodes into many times its size) is replaced after the body, so its memory goes back
to the system instead of staying with the server."""


PARSER_MEMORY_BYTES = 512 << 20
"""Data memory a parser process may add to what it holds at start (its `RLIMIT_DATA`):
a body whose values decode into more (e.g. millions of tiny lists in a call test's
arguments, which the model types `Any`) is refused as holding too many values, instead
of costing the machine gigabytes."""


def _limit_parser_memory(budget: int) -> None:
    # The initializer of each parser process. RLIMIT_DATA counts what a decode allocates
    # (heap and anonymous mappings), not the shared libraries mapped at start.
    with open("/proc/self/status") as status:
        held = next(int(line.split()[1]) << 10 for line in status if line.startswith("VmData:"))
    resource.setrlimit(resource.RLIMIT_DATA, (held + budget, held + budget))


def _resident_bytes() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _parse_in_worker(body: bytes, model: type[Model]) -> tuple[str, Any, int]:
    """`parse_body` in a parser process. Failures come back as data: the message, or the
    first validation errors without their inputs (a body's worth of objects would
    otherwise be pickled back into the server). Last, the process's resident bytes."""
    try:
        parsed = parse_body(body, model)
        try:
            outcome: tuple[str, Any] = ("parsed", pickle.dumps(parsed, pickle.HIGHEST_PROTOCOL))
        except (RecursionError, pickle.PicklingError):
            outcome = ("invalid", "the request body is nested too deeply")
    except InvalidInput as exc:
        outcome = ("invalid", exc.message)
    except RequestValidationError as exc:
        outcome = ("unfit", validation_detail(exc.errors()))
    except MemoryError:
        outcome = ("invalid", "the request body holds too many values to decode")
    return (*outcome, _resident_bytes())


class BodyParser:
    """Parses request bodies off the event loop; big ones in parser processes.

    The processes are started on first use (or by `warm_up`) from a fork server, never by
    forking the server itself (its threads hold locks). If one dies, the body at hand is
    parsed on a thread instead and new processes are started for the next one; one that
    grew big on a body is replaced after it.
    """

    def __init__(
        self, processes: int = PARSER_PROCESSES, memory_bytes: int = PARSER_MEMORY_BYTES
    ) -> None:
        self.processes = processes
        self.memory_bytes = memory_bytes
        # Two lanes: "small" (up to SMALL_LANE_BYTES, one process) and "big".
        self._pools: dict[str, ProcessPoolExecutor | None] = {"small": None, "big": None}
        self._lock = threading.Lock()

    def _processes(self, lane: str = "big") -> ProcessPoolExecutor:
        with self._lock:
            pool = self._pools[lane]
            if pool is None:
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload(["cobalt.executor.bodies"])
                pool = ProcessPoolExecutor(
                    max_workers=1 if lane == "small" else self.processes,
                    mp_context=context,
                    initializer=_limit_parser_memory,
                    initargs=(self.memory_bytes,),
                )
                self._pools[lane] = pool
            return pool

    def _retire(self, pool: ProcessPoolExecutor) -> None:
        # Bodies already handed to it finish; the next body starts a fresh pool.
        with self._lock:
            for lane, current in self._pools.items():
                if current is pool:
                    self._pools[lane] = None
        pool.shutdown(wait=False)

    def warm_up(self) -> None:
        """Start the parser processes now, so the first big body does not pay for it."""
        futures = [self._processes("small").submit(int)]
        pool = self._processes("big")
        futures += [pool.submit(int) for _ in range(self.processes)]
        for future in futures:
            future.result()

    async def parse(self, body: bytes, model: type[Model]) -> Model:
        """Decode and validate `body` (see `parse_body` for what it raises)."""
        if len(body) <= INLINE_PARSE_BYTES:
            return parse_body(body, model)
        if len(body) <= PROCESS_PARSE_BYTES:
            return await asyncio.to_thread(parse_body, body, model)
        loop = asyncio.get_running_loop()
        pool = self._processes("small" if len(body) <= SMALL_LANE_BYTES else "big")
        try:
            kind, value, resident = await loop.run_in_executor(pool, _parse_in_worker, body, model)
        except BrokenProcessPool:
            logger.warning("a body parser process died; parsing this body on a thread")
            self._retire(pool)
            return await asyncio.to_thread(parse_body, body, model)
        if resident > RECYCLE_PARSER_BYTES:
            self._retire(pool)
        if kind == "invalid":
            raise InvalidInput(value)
        if kind == "unfit":
            raise RequestValidationError(value)
        parsed: Model = await asyncio.to_thread(pickle.loads, value)
        return parsed

    def close(self) -> None:
        with self._lock:
            pools = [pool for pool in self._pools.values() if pool is not None]
            self._pools = dict.fromkeys(self._pools)
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)


async def read_body(request: Request, model: type[Model]) -> Model:
    """Read the body and parse it into `model` off the event loop (the app's
    `BodyParser`, or a worker thread in an app started without one).

    Call it after the route's checks (the bearer token): nothing reads the body before.

    Raises:
        ClientDisconnected: the client went away while sending the body.
    """
    try:
        body = await request.body()
    except ClientDisconnect:
        raise ClientDisconnected("the client disconnected while sending the body") from None
    parser: BodyParser | None = getattr(request.app.state, "body_parser", None)
    if parser is not None:
        return await parser.parse(body, model)
    if len(body) <= INLINE_PARSE_BYTES:
        return parse_body(body, model)
    return await asyncio.to_thread(parse_body, body, model)


REF_TEMPLATE = "#/components/schemas/{model}"


def openapi_body(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAPI `requestBody` of a route that reads its body with `read_body`
    (`add_body_schemas` puts the model's schema into the document's components)."""
    reference = {"$ref": REF_TEMPLATE.format(model=model.__name__)}
    return {
        "requestBody": {"required": True, "content": {"application/json": {"schema": reference}}}
    }


def add_body_schemas(app: FastAPI, models: list[type[BaseModel]]) -> None:
    """Make `app.openapi()` include the schemas of bodies FastAPI does not parse itself."""
    build = app.openapi
    built: list[dict[str, Any]] = []

    def openapi() -> dict[str, Any]:
        # Built once: /openapi.json is anonymous, and a flood of it must cost no schema
        # generation per request.
        if built:
            return built[0]
        spec = build()
        components = spec.setdefault("components", {}).setdefault("schemas", {})
        for model in models:
            schema = model.model_json_schema(ref_template=REF_TEMPLATE)
            components.update(schema.pop("$defs", {}))
            components[model.__name__] = schema
        built.append(spec)
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
