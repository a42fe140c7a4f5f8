"""`cobalt executor serve` (the service) and `cobalt exec run` (judge a file by hand)."""

from __future__ import annotations

import typer

from cobalt.executor.errors import SandboxUnavailable
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.logging import configure_logging

__all__ = ["exec_app", "executor_app"]

executor_app = typer.Typer(help="The sandboxed code-executor service.", no_args_is_help=True)
exec_app = typer.Typer(help="Run programs on tests from the terminal.", no_args_is_help=True)


@executor_app.command("serve")
def serve(
    host: str = typer.Option(
        None, help="Address to bind (env COBALT_EXECUTOR_HOST; default 127.0.0.1)."
    ),
    port: int = typer.Option(None, help="Port (env COBALT_EXECUTOR_PORT; default 8100)."),
    slots: int = typer.Option(
        None, help="Sandboxes run at once (env COBALT_EXECUTOR_SLOTS; default CPUs)."
    ),
    unsafe_no_sandbox: bool = typer.Option(
        False,
        "--unsafe-no-sandbox",
        help="Run WITHOUT bubblewrap (rlimits and seccomp only). Never for untrusted code.",
    ),
) -> None:
    """Start the executor HTTP service (POST /v1/execute, /v1/execute/batch, /run_code)."""
    import uvicorn

    from cobalt.executor.app import create_app

    overrides = {
        key: value
        for key, value in {"host": host, "port": port, "slots": slots}.items()
        if value is not None
    }
    if unsafe_no_sandbox:
        overrides["unsafe_no_sandbox"] = True
    settings = ExecutorSettings(**overrides)
    configure_logging(settings.log_level, json_lines=settings.log_json)
    try:
        uvicorn.run(
            create_app(settings),
            host=settings.host,
            port=settings.port,
            log_config=None,
            timeout_graceful_shutdown=10,
        )
    except SandboxUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc
