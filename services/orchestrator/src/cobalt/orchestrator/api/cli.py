"""`cobalt orchestrator serve`: the REST API (runs, datasets) under uvicorn."""

from __future__ import annotations

from typing import Annotated

import typer

from cobalt.orchestrator.console import handled, settings_or_exit
from cobalt.shared import cli as shared_cli
from cobalt.shared.logging import configure_logging

__all__ = ["orchestrator_app"]

orchestrator_app = typer.Typer(help="The orchestrator's REST API.", no_args_is_help=True)


@orchestrator_app.command("serve")
def serve(
    host: Annotated[
        str | None, typer.Option(help="Address (env COBALT_ORCHESTRATOR_HOST; default 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port (env COBALT_ORCHESTRATOR_PORT; default 8200).")
    ] = None,
) -> None:
    """Serve /v1/runs, /v1/datasets and /healthz (OpenAPI at /docs).

    Listens on 127.0.0.1 unless told otherwise; before exposing it, set its tokens
    (COBALT_ORCHESTRATOR_WRITE_TOKEN, COBALT_ORCHESTRATOR_READ_TOKEN: docs/configuration.md).
    """
    import uvicorn

    from cobalt.orchestrator.api.app import create_app
    from cobalt.shared.clients import ExecutorClientSettings
    from cobalt.shared.connections import header_deadline_protocol

    settings = settings_or_exit()
    with handled():  # a mistyped SQLite path: one line, not a new empty store
        from cobalt.orchestrator.settings import default_database_url
        from cobalt.orchestrator.store.db import check_sqlite_folder

        check_sqlite_folder(settings.database_url, default_url=default_database_url())
    executor = shared_cli.settings_or_exit(ExecutorClientSettings, "COBALT_EXECUTOR_*")
    configure_logging(settings.log_level, json_lines=settings.log_json)
    uvicorn.run(
        create_app(settings, executor),
        host=host or settings.orchestrator_host,
        port=port or settings.orchestrator_port,
        log_config=None,
        timeout_graceful_shutdown=10,
        http=header_deadline_protocol(settings.orchestrator_header_timeout_s),
    )
