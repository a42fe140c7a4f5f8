"""Request bodies, read and validated off the event loop.

FastAPI parses a JSON body and validates it on the event loop; a body of tens of MiB then
holds every other request (health probes included) for seconds. Here the body is read
(its size is already capped by `BodySizeLimit`) and handed to a worker thread, which
decodes it with the executor's JSON rules (`values.loads_value`: integers of any length,
no stack overflow on deep nesting) and validates it.
"""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError

from cobalt.executor.values import loads_value
from cobalt.shared.errors import InvalidInput

__all__ = ["INLINE_PARSE_BYTES", "add_body_schemas", "openapi_body", "parse_body", "read_body"]

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


async def read_body(request: Request, model: type[Model]) -> Model:
    """Read the body and parse it into `model` on a worker thread."""
    body = await request.body()
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
