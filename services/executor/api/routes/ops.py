"""Health, readiness, metrics and capabilities."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from cobalt.executor.api.deps import ServiceDep, require_token
from cobalt.shared.contracts import ExecutorInfo
from cobalt.shared.errors import Unavailable

router = APIRouter(tags=["ops"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up and serving HTTP."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(service: ServiceDep) -> dict[str, str]:
    """A canary program ran in a real sandbox and was judged correctly."""
    if not await service.is_ready():
        raise Unavailable("canary program did not pass: the sandbox is not working")
    return {"status": "ready"}


@router.get("/metrics")
async def metrics(service: ServiceDep) -> Response:
    """Prometheus metrics."""
    return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/v1/info", dependencies=[Depends(require_token)])
async def info(service: ServiceDep) -> ExecutorInfo:
    """Languages, comparators, default and maximum limits, capacity."""
    return service.info()
