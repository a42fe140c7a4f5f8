"""ScaleBox's `/common_evaluate_batch`, thin over `cobalt.executor.scalebox` and the
executor's service. Served like `/run_code`: behind the bearer token at the root, and
under `/t/<token>` for clients that send no header."""

from __future__ import annotations

from fastapi import APIRouter, Request

from cobalt.executor.api.deps import ServiceDep
from cobalt.executor.bodies import openapi_body, read_body
from cobalt.executor.connections import unless_disconnected
from cobalt.executor.scalebox import ScaleBoxRequest, ScaleBoxResult, to_execute_request, to_result

router = APIRouter(tags=["scalebox"])


@router.post("/common_evaluate_batch", openapi_extra=openapi_body(ScaleBoxRequest))
async def common_evaluate_batch(request: Request, service: ServiceDep) -> ScaleBoxResult:
    """Judge one completion on all its test cases: `accepted`, and per case `passed`."""
    parsed = await read_body(request, ScaleBoxRequest)
    executed = to_execute_request(
        parsed, languages=service.info().languages, max_wall_s=service.settings.max_wall_s
    )
    response = await unless_disconnected(request, service.execute(executed))
    return to_result(parsed, executed, response)
