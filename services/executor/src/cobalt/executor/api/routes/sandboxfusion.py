"""SandboxFusion-compatible `/run_code`, so tools written for it work unchanged."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from cobalt.executor.api.deps import ServiceDep, require_token
from cobalt.shared.contracts import RunCodeRequest, RunCodeResponse

router = APIRouter(tags=["sandboxfusion"], dependencies=[Depends(require_token)])


@router.post("/run_code")
async def run_code(request: RunCodeRequest, service: ServiceDep) -> RunCodeResponse:
    """Run a Python script once on stdin, as SandboxFusion's run_code does."""
    return await service.run_code(request)
