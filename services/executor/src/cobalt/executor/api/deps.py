"""Dependencies routes declare in their signatures."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from cobalt.executor.service import ExecutorService
from cobalt.shared.auth import AccessTokens, bearer_access

__all__ = ["ServiceDep", "require_token"]


# Dependencies are `async def` on purpose: FastAPI runs plain `def` dependencies in a
# thread pool, a thread hop per request that costs more than the work they do.
async def get_service(request: Request) -> ExecutorService:
    service: ExecutorService = request.app.state.service
    return service


ServiceDep = Annotated[ExecutorService, Depends(get_service)]


def _tokens(request: Request) -> AccessTokens:
    # One token, allowed everything: the executor's callers all run programs.
    service: ExecutorService = request.app.state.service
    return AccessTokens(write=service.settings.auth_token)


require_token = bearer_access(_tokens, settings_hint="COBALT_EXECUTOR_AUTH_TOKEN")
"""Check the bearer token when the executor is configured with one."""
