"""Judging programs: one request, or many in a batch."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import StreamingResponse

from cobalt.executor.api.deps import ServiceDep, require_token
from cobalt.executor.batch_stream import streamed_batch
from cobalt.executor.bodies import openapi_body, read_body
from cobalt.executor.connections import unless_disconnected
from cobalt.shared.contracts import (
    BatchExecuteRequest,
    BatchExecuteResponse,
    ExecuteRequest,
    ExecuteResponse,
)

router = APIRouter(prefix="/v1", tags=["execute"], dependencies=[Depends(require_token)])


@router.post("/execute", openapi_extra=openapi_body(ExecuteRequest))
async def execute(request: Request, service: ServiceDep) -> ExecuteResponse:
    """Run one program on its tests; per-test verdicts in test order."""
    parsed = await read_body(request, ExecuteRequest)
    return await unless_disconnected(request, service.execute(parsed))


@router.post(
    "/execute/batch",
    response_model=BatchExecuteResponse,
    openapi_extra=openapi_body(BatchExecuteRequest),
)
async def execute_batch(request: Request, service: ServiceDep) -> StreamingResponse:
    """Run many programs with bounded parallelism; one response per request, in order
    (sent one program at a time: `batch_stream.py`)."""
    parsed = await read_body(request, BatchExecuteRequest)
    return streamed_batch(await unless_disconnected(request, service.execute_batch(parsed)))
