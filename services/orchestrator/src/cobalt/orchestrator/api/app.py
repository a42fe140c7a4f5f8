"""The orchestrator API's composition root: `create_app(settings)`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from cobalt.orchestrator.api import browse, datasets, health, runs, training
from cobalt.orchestrator.api.ui import install_ui
from cobalt.orchestrator.settings import OrchestratorSettings
from cobalt.orchestrator.store.db import make_engine, make_sessionmaker, upgrade_database
from cobalt.shared.clients import ExecutorClientSettings
from cobalt.shared.http import install_error_handlers
from cobalt.shared.version import __version__

__all__ = ["create_app"]


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
        app.state.settings = settings
        app.state.executor_settings = executor or ExecutorClientSettings()
        app.state.sessions = make_sessionmaker(engine)
        yield
        engine.dispose()

    app = FastAPI(title="Cobalt orchestrator", version=__version__, lifespan=lifespan)
    install_error_handlers(app)
    app.include_router(health.router)
    app.include_router(datasets.router)
    app.include_router(runs.router)
    app.include_router(training.router)
    app.include_router(browse.router)
    install_ui(app)
    return app
