"""Judging programs: one request, or many in a batch."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from cobalt.executor.api.deps import ServiceDep, require_token
from cobalt.shared.contracts import (
    BatchExecuteRequest,
    BatchExecuteResponse,
    ExecuteRequest,
    ExecuteResponse,
)

router = APIRouter(prefix="/v1", tags=["execute"], dependencies=[Depends(require_token)])


@router.post("/execute")
async def execute(request: ExecuteRequest, service: ServiceDep) -> ExecuteResponse:
    """Run one program on its tests; per-test verdicts in test order."""
    return await service.execute(request)


@router.post("/execute/batch")
async def execute_batch(batch: BatchExecuteRequest, service: ServiceDep) -> BatchExecuteResponse:
    """Run many programs with bounded parallelism; one response per request, in order."""
    return await service.execute_batch(batch)
