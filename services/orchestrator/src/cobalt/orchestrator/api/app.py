"""The orchestrator API's composition root: `create_app(settings)`.

Everything every request goes through is set up here once, so a route added later gets
it without asking: the body-size cap and body deadline, the refusal of NUL characters,
the bearer-token check (every router under /v1 is included through `protected`), and the
one error mapping (database errors included, `store.errors`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager, nullcontext

from fastapi import APIRouter, Depends, FastAPI, Request

from cobalt.orchestrator.api import browse, datasets, health, results, runs, templates, training
from cobalt.orchestrator.api.nul_characters import RejectNulCharacters
from cobalt.orchestrator.api.ui import install_ui
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
from cobalt.orchestrator.store.errors import DATABASE_TRANSLATIONS
from cobalt.orchestrator.worker.carrier import carrier_for
from cobalt.orchestrator.worker.recovery import Recovery
from cobalt.shared.auth import AccessTokens, bearer_access
from cobalt.shared.clients import ExecutorClientSettings
from cobalt.shared.connections import RequestBodyGuard
from cobalt.shared.docs import NO_DEFAULT_DOCS, serve_api_docs
from cobalt.shared.http import document_error_responses, install_error_handlers
from cobalt.shared.version import __version__

__all__ = ["create_app"]

UNPROTECTED_PATHS = frozenset({"/healthz"})
"""Paths served without a token: liveness probes carry none (and it tells nothing)."""


def _access_tokens(settings: OrchestratorSettings) -> AccessTokens:
    return AccessTokens(
        read=settings.orchestrator_read_token, write=settings.orchestrator_write_token
    )


def _tokens(request: Request) -> AccessTokens:
    tokens: AccessTokens = request.app.state.access_tokens
    return tokens


def create_app(
    settings: OrchestratorSettings, executor: ExecutorClientSettings | None = None
) -> FastAPI:
    """The REST API over the store, the runs and the queue: one router per resource.

    `executor` is the executor evaluation and in-process rollouts use (None: read from
    COBALT_EXECUTOR_* once, when the app starts).
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        upgrade_database(settings.database_url)
        engine = make_engine(settings.database_url)
        app.state.executor_settings = executor or ExecutorClientSettings()
        app.state.sessions = make_sessionmaker(engine)
        # Queued (COBALT_REDIS_URL) or in background threads of this process: chosen once.
        app.state.carrier = carrier = carrier_for(settings, app.state.executor_settings)
        # Without a queue, this process carries the training rounds: it recovers them too.
        recovery = Recovery(carrier, app.state.sessions) if not carrier.queued else None
        with recovery or nullcontext():
            yield
        engine.dispose()

    app = FastAPI(
        title="Cobalt orchestrator", version=__version__, lifespan=lifespan, **NO_DEFAULT_DOCS
    )
    app.state.settings = settings
    app.state.access_tokens = tokens = _access_tokens(settings)
    install_error_handlers(app, DATABASE_TRANSLATIONS)
    # Added innermost first: the guard's size cap and deadline cover the NUL check's reading.
    app.add_middleware(RejectNulCharacters)
    app.add_middleware(
        RequestBodyGuard,
        max_bytes=settings.orchestrator_max_body_bytes,
        piece_timeout_s=settings.orchestrator_body_timeout_s,
        total_timeout_s=settings.orchestrator_body_deadline_s,
    )

    # Without tokens no dependency is attached, so the OpenAPI document declares no
    # security scheme it would not enforce.
    checks = (
        [Depends(bearer_access(_tokens, settings_hint="COBALT_ORCHESTRATOR_*_TOKEN"))]
        if tokens.enforced
        else []
    )
    protected = APIRouter(dependencies=checks)
    for router in (datasets, runs, training, browse, results, templates):
        protected.include_router(router.router)
    app.include_router(health.router)
    app.include_router(protected)
    # Before the UI, whose pages sit at the root; the document is built on first request,
    # after the error responses below are added to it.
    serve_api_docs(app)
    install_ui(app)

    def error_statuses(path: str, method: str) -> Iterable[int]:
        if path in UNPROTECTED_PATHS or not path.startswith("/v1/"):
            return ()
        auth = (401, 403) if tokens.enforced else ()
        upstream = (502,) if path.endswith("/evaluate") else ()
        return (*auth, 404, 408, 409, 413, 422, *upstream, 503)

    document_error_responses(app, error_statuses)
    return app
