"""Request bodies, read and validated off the event loop.

FastAPI parses a JSON body and validates it on the event loop; a body of tens of MiB then
holds every other request (health probes included) for seconds. Here the body is read
(its size is already capped by `BodySizeLimit`) and decoded with the executor's JSON
rules (`values.loads_value`: integers of any length, no stack overflow on deep nesting)
and validated elsewhere: small bodies on a worker thread, big ones in a parser process.
A thread is not enough for big bodies: decoding one long JSON string is a single C call
that holds the GIL throughout (about 40 ms per MiB of escaped text on these machines),
so a 20 MiB body froze the event loop, and `/healthz` with it, for most of a second.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from cobalt.executor.values import loads_value
from cobalt.shared.errors import InvalidInput

__all__ = [
    "INLINE_PARSE_BYTES",
    "PROCESS_PARSE_BYTES",
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
    """Decode and validate one JSON body.

    Raises:
        InvalidInput: the body is not JSON (or is nested too deeply to decode).
        RequestValidationError: the JSON does not fit `model`.
    """
    try:
        data = loads_value(body)
    except ValueError as exc:
        raise InvalidInput(f"the request body is not valid JSON: {str(exc)[:200]}") from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = [{**error, "loc": ("body", *error["loc"])} for error in exc.errors()]
        raise RequestValidationError(errors) from exc
    except RecursionError as exc:
        raise InvalidInput("the request body is nested too deeply") from exc


PROCESS_PARSE_BYTES = 1 << 20
"""Bodies over this are parsed in the parser process; below it, the GIL is held for tens
of milliseconds at most, less than the round trip to another process costs."""


def _parse_in_worker(body: bytes, model: type[Model]) -> tuple[str, Any]:
    """`parse_body` in the parser process; failures come back as data (always picklable)."""
    try:
        return "parsed", parse_body(body, model)
    except InvalidInput as exc:
        return "invalid", exc.message
    except RequestValidationError as exc:
        return "unfit", [{key: _plain(value) for key, value in e.items()} for e in exc.errors()]


def _plain(value: Any) -> Any:
    # Validation errors may carry exception objects in `ctx`: keep their text only.
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    return str(value) if isinstance(value, BaseException) else value


class BodyParser:
    """Parses request bodies off the event loop; big ones in one parser process.

    The process is started on first use (or by `warm_up`) from a fork server, never by
    forking the server itself (its threads hold locks). If it dies, the body at hand is
    parsed on a thread instead and a new process is started for the next one.
    """

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _processes(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                context = multiprocessing.get_context("forkserver")
                context.set_forkserver_preload(["cobalt.executor.bodies"])
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=context)
            return self._pool

    def warm_up(self) -> None:
        """Start the parser process now, so the first big body does not pay for it."""
        self._processes().submit(int).result()

    async def parse(self, body: bytes, model: type[Model]) -> Model:
        """Decode and validate `body` (see `parse_body` for what it raises)."""
        if len(body) <= INLINE_PARSE_BYTES:
            return parse_body(body, model)
        if len(body) <= PROCESS_PARSE_BYTES:
            return await asyncio.to_thread(parse_body, body, model)
        loop = asyncio.get_running_loop()
        pool = self._processes()
        try:
            kind, value = await loop.run_in_executor(pool, _parse_in_worker, body, model)
        except BrokenProcessPool:
            logger.warning("the body parser process died; parsing this body on a thread")
            with self._lock:
                if self._pool is pool:
                    self._pool = None
            pool.shutdown(wait=False)
            return await asyncio.to_thread(parse_body, body, model)
        if kind == "invalid":
            raise InvalidInput(value)
        if kind == "unfit":
            raise RequestValidationError(value)
        parsed: Model = value
        return parsed

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)


async def read_body(request: Request, model: type[Model]) -> Model:
    """Read the body and parse it into `model` off the event loop (the app's
    `BodyParser`, or a worker thread in an app started without one)."""
    body = await request.body()
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

    def openapi() -> dict[str, Any]:
        spec = build()
        components = spec.setdefault("components", {}).setdefault("schemas", {})
        for model in models:
            schema = model.model_json_schema(ref_template=REF_TEMPLATE)
            components.update(schema.pop("$defs", {}))
            components[model.__name__] = schema
        return spec

    app.openapi = openapi  # type: ignore[method-assign]
