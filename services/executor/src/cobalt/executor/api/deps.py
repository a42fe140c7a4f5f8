"""Dependencies routes declare in their signatures."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from cobalt.executor.service import ExecutorService
from cobalt.shared.auth import AccessTokens, bearer_access
from cobalt.shared.errors import Unauthorized

__all__ = [
    "PATH_TOKEN_PREFIX",
    "ServiceDep",
    "require_header_token",
    "require_path_token",
    "require_token",
]

PATH_TOKEN_PREFIX = "/t/{token}"
"""Where the token-in-the-path routes live (`http://host:port/t/<token>/run_code`)."""


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


async def require_path_token(request: Request, token: str) -> None:
    """Check the token a `/t/<token>/...` path carries, for clients that cannot send a
    header (no SandboxFusion client can): their endpoint is `http://host:port/t/<token>`."""
    tokens = _tokens(request)
    if tokens.enforced and tokens.scope_of(token) is None:
        raise Unauthorized(
            "wrong token in the path /t/<token>/ (the token is the server's "
            "COBALT_EXECUTOR_AUTH_TOKEN)"
        )


async def require_header_token(request: Request) -> None:
    """Check Judge0's `X-Auth-Token` header, or else the bearer token (the `judge0` SDK
    sends whichever headers its client is given)."""
    tokens = _tokens(request)
    if not tokens.enforced:
        return
    given = request.headers.get("x-auth-token")
    if given is None:
        scheme, _, given = request.headers.get("authorization", "").partition(" ")
        given = given if scheme.lower() == "bearer" else ""
    if tokens.scope_of(given.strip()) is None:
        raise Unauthorized(
            "missing or wrong token: send 'X-Auth-Token: <token>' or 'Authorization: Bearer "
            "<token>' (the token is the server's COBALT_EXECUTOR_AUTH_TOKEN)"
        )
