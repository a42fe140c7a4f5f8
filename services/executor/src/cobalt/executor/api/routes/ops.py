"""Health, readiness, metrics and capabilities."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from cobalt.executor.api.deps import ServiceDep, require_token
from cobalt.executor.readiness import ReadyState
from cobalt.shared.contracts import ExecutorInfo
from cobalt.shared.errors import Unavailable

router = APIRouter(tags=["ops"])


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """The process is up and serving HTTP."""
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(service: ServiceDep) -> dict[str, str]:
    """Ready unless the sandbox is broken (cached: a canary runs on a schedule, not here)."""
    state, reason = service.readiness_state()
    if state in (ReadyState.BROKEN, ReadyState.STARTING):
        raise Unavailable(f"not ready ({state.value}): {reason}", detail={"state": state.value})
    return {"status": "ready", "state": state.value}


@router.get("/metrics")
async def metrics(service: ServiceDep) -> Response:
    """Prometheus metrics."""
    return Response(generate_latest(service.metrics.registry), media_type=CONTENT_TYPE_LATEST)


@router.get("/v1/info", dependencies=[Depends(require_token)])
async def info(service: ServiceDep) -> ExecutorInfo:
    """Languages, judge presets (`compare_modes`), default and maximum limits, capacity."""
    return service.info()
