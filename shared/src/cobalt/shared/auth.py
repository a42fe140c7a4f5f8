"""Bearer-token access for every Cobalt HTTP service: who may read, who may write.

A service is configured with up to two tokens. The write token allows every request;
the read token allows only reading ones (GET, HEAD, OPTIONS), so a dashboard or the web
UI can be handed a token that cannot start, stop or change anything. With no token
configured, access is open (local use on 127.0.0.1). Tokens are compared in constant time.

The check is one FastAPI dependency (`bearer_access`); apps attach it to a router or the
app, never route by route, so a route added later is covered without anyone remembering.
Declared through `HTTPBearer`, it also puts the bearer scheme into the OpenAPI document,
which then says exactly what the server enforces.
"""

from __future__ import annotations

import enum
import secrets
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, SecretStr

from cobalt.shared.errors import Forbidden, Unauthorized

__all__ = ["READING_METHODS", "AccessTokens", "Scope", "bearer_access"]

READING_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
"""Methods a read-only token may use: they change nothing on any Cobalt service."""


class Scope(enum.StrEnum):
    """What a presented token allows."""

    READ = "read"
    WRITE = "write"


class AccessTokens(BaseModel):
    """The tokens a service accepts; None for a scope nobody is given."""

    model_config = ConfigDict(frozen=True)

    read: SecretStr | None = None
    write: SecretStr | None = None

    @property
    def enforced(self) -> bool:
        """Whether requests must carry a token at all."""
        return self.read is not None or self.write is not None

    def scope_of(self, given: str) -> Scope | None:
        """The scope `given` grants (the write token also reads), or None if it is no token."""
        if _same(given, self.write):
            return Scope.WRITE
        if _same(given, self.read):
            return Scope.READ
        return None


def _same(given: str, expected: SecretStr | None) -> bool:
    if expected is None or not expected.get_secret_value():
        return False  # an empty token is nobody's: no header at all would match it
    return secrets.compare_digest(given.encode(), expected.get_secret_value().encode())


_bearer = HTTPBearer(
    auto_error=False,
    description="A read token allows GET requests; the write token allows every request.",
)


def bearer_access(
    tokens_of: Callable[[Request], AccessTokens], *, settings_hint: str
) -> Callable[..., Awaitable[None]]:
    """The dependency that checks a request's bearer token against `tokens_of(request)`.

    Args:
        tokens_of: The app's tokens (usually read from `request.app.state`).
        settings_hint: Where the server's tokens are set, for the error message.

    The dependency raises `Unauthorized` (401) for a missing or unknown token and
    `Forbidden` (403) for a read token on a request that writes.
    """

    # `async def` on purpose: FastAPI runs plain `def` dependencies in a thread pool, a
    # thread hop per request that costs more than the check itself.
    async def check_bearer_token(
        request: Request,
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
    ) -> None:
        tokens = tokens_of(request)
        if not tokens.enforced:
            return
        given = credentials.credentials if credentials is not None else ""
        scope = tokens.scope_of(given)
        if scope is None:
            raise Unauthorized(
                "missing or wrong bearer token: send 'Authorization: Bearer <token>' "
                f"(the tokens are the server's {settings_hint})"
            )
        if scope is Scope.READ and request.method not in READING_METHODS:
            where = f"{request.method} {request.url.path}"
            raise Forbidden(f"this token is read-only: {where} needs the write token")

    return check_bearer_token
