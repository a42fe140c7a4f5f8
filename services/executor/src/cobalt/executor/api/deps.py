"""Dependencies routes declare in their signatures."""

from __future__ import annotations

import secrets
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from cobalt.executor.service import ExecutorService
from cobalt.shared.errors import Unauthorized

__all__ = ["ServiceDep", "require_token"]

_bearer = HTTPBearer(auto_error=False)


# Dependencies are `async def` on purpose: FastAPI runs plain `def` dependencies in a
# thread pool, a thread hop per request that costs more than the work they do.
async def get_service(request: Request) -> ExecutorService:
    service: ExecutorService = request.app.state.service
    return service


ServiceDep = Annotated[ExecutorService, Depends(get_service)]


async def require_token(
    service: ServiceDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Check the bearer token when the executor is configured with one."""
    expected = service.settings.auth_token
    if expected is None:
        return
    given = credentials.credentials if credentials is not None else ""
    if not secrets.compare_digest(given.encode(), expected.get_secret_value().encode()):
        raise Unauthorized(
            "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
            "(the token is the server's COBALT_EXECUTOR_AUTH_TOKEN)"
        )
