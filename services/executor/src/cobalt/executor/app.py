"""The executor's composition root: `create_app(settings)` builds everything once."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from cobalt.executor.api.client_errors import ClientErrorLog, hide_path_tokens_in_access_log
from cobalt.executor.api.deps import PATH_TOKEN_PREFIX, require_path_token, require_token
from cobalt.executor.api.routes import execute, judge0, ops, sandboxfusion, scalebox
from cobalt.executor.bodies import BodyParser, add_body_schemas
from cobalt.executor.errors import FileDescriptorsExhausted
from cobalt.executor.judge0 import Judge0Batch, Judge0Submission, SubmissionStore, run_when_room
from cobalt.executor.metrics import ExecutorMetrics
from cobalt.executor.pool import SandboxPool
from cobalt.executor.scalebox import ScaleBoxRequest
from cobalt.executor.service import ExecutorService
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.connections import RequestBodyGuard
from cobalt.shared.contracts import BatchExecuteRequest, ExecuteRequest, RunCodeRequest
from cobalt.shared.docs import NO_DEFAULT_DOCS, serve_api_docs
from cobalt.shared.http import error_response, install_error_handlers
from cobalt.shared.version import __version__

__all__ = ["create_app"]


def create_app(settings: ExecutorSettings, *, pool: SandboxPool | None = None) -> FastAPI:
    """Build the executor app.

    Args:
        settings: The executor's settings.
        pool: A started sandbox pool to use (tests share one); by default the app builds
            and starts its own at start-up and closes it at shutdown.

    Raises:
        SandboxUnavailable: at start-up, if bubblewrap cannot run and the unsafe mode is off.
    """

    body_parser = BodyParser()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        own_pool = pool is None
        sandboxes = pool or SandboxPool(settings.sandbox_config())
        if own_pool:
            sandboxes.start()
        service = ExecutorService(settings=settings, pool=sandboxes, metrics=ExecutorMetrics())
        app.state.service = service
        judge0_store = SubmissionStore(
            max_submissions=settings.judge0_max_submissions,
            ttl_s=settings.judge0_result_ttl_s,
            run=functools.partial(run_when_room, service.execute, service.admission.wait_for_room),
        )
        app.state.judge0 = judge0_store
        app.state.body_parser = body_parser
        await asyncio.to_thread(body_parser.warm_up)
        # One canary before serving, so /readyz is right from the first call.
        await service.readiness.check(service.run_canary)
        watcher = asyncio.create_task(service.readiness.watch(service.run_canary))
        try:
            yield
        finally:
            watcher.cancel()
            judge0_store.close()
            body_parser.close()
            service.close()
            if own_pool:
                sandboxes.close()

    app = FastAPI(
        title="Cobalt executor",
        version=__version__,
        description="Runs untrusted programs on tests in a sandbox and judges each test.",
        lifespan=lifespan,
        **NO_DEFAULT_DOCS,
    )
    install_error_handlers(app)

    @app.exception_handler(FileDescriptorsExhausted)
    async def _out_of_fds(request: Request, exc: FileDescriptorsExhausted) -> JSONResponse:
        # A retryable 503: the caller's retry policy honours Retry-After.
        headers = {"Retry-After": str(max(1, round(exc.retry_after_s)))}
        return error_response(503, exc.error_type, exc.message, exc.detail, headers)

    # Every route's body is read by the route itself (`bodies.read_body`), after its
    # token check, within this size cap and deadline.
    app.add_middleware(
        RequestBodyGuard,
        max_bytes=settings.max_body_bytes,
        piece_timeout_s=settings.body_timeout_s,
        total_timeout_s=settings.body_deadline_s,
    )
    # Outside every other middleware: it sees each 4xx, the body guard's included.
    app.add_middleware(ClientErrorLog)
    hide_path_tokens_in_access_log()
    app.include_router(execute.router)
    for guarded in (sandboxfusion.router, scalebox.router):
        app.include_router(guarded, dependencies=[Depends(require_token)])
    app.include_router(sandboxfusion.probes)
    # The same routes with the token in the path, for clients that send no header
    # (left out of the OpenAPI document: the same operations as at the root).
    for routes in (sandboxfusion.router, scalebox.router, sandboxfusion.probes):
        app.include_router(
            routes,
            prefix=PATH_TOKEN_PREFIX,
            dependencies=[Depends(require_path_token)],
            include_in_schema=False,
        )
    app.include_router(judge0.router)
    app.include_router(ops.router)
    add_body_schemas(
        app,
        [
            ExecuteRequest,
            BatchExecuteRequest,
            RunCodeRequest,
            Judge0Submission,
            Judge0Batch,
            ScaleBoxRequest,
        ],
    )
    serve_api_docs(app)
    return app
