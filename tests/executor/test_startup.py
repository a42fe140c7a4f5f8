"""Start-up rules: no bubblewrap means no service, unless the unsafe mode is asked for."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from typer.testing import CliRunner

from cobalt.executor.app import create_app
from cobalt.executor.errors import SandboxUnavailable
from cobalt.executor.interpreter import describe_interpreter
from cobalt.executor.pool import SandboxPool
from cobalt.executor.sandbox import SandboxConfig
from cobalt.executor.settings import ExecutorSettings
from cobalt.shared.auth import AccessTokens
from cobalt.shared.cli import EXIT_USAGE
from cobalt.shared.commands import app


@pytest.fixture
def path_without_bwrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A PATH on which every usual tool is found except bubblewrap."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("ldd", "python3"):
        for directory in os.environ["PATH"].split(os.pathsep):
            candidate = Path(directory) / tool
            if candidate.exists() and "/.pyenv/shims" not in directory:
                (bin_dir / tool).symlink_to(candidate)
                break
    monkeypatch.setenv("PATH", str(bin_dir))


@pytest.mark.usefixtures("path_without_bwrap")
def test_refuses_to_start_without_bubblewrap() -> None:
    app = create_app(ExecutorSettings(slots=1))
    with pytest.raises(SandboxUnavailable, match="bubblewrap"):
        with TestClient(app):
            pass


@pytest.mark.usefixtures("path_without_bwrap")
def test_unsafe_mode_runs_and_says_so_loudly(caplog: pytest.LogCaptureFixture) -> None:
    settings = ExecutorSettings(slots=1, unsafe_no_sandbox=True)
    with caplog.at_level(logging.CRITICAL), TestClient(create_app(settings)) as client:
        response = client.post(
            "/v1/execute",
            json={
                "code": "print(int(input()) + 1)",
                "tests": [{"stdin": "1", "expected_stdout": "2"}],
            },
        )
        info = client.get("/v1/info").json()
    assert response.json()["passed"] == 1
    assert info["sandbox"].startswith("none (UNSAFE)+")
    assert any("UNSAFE" in record.getMessage() for record in caplog.records)


def test_pyenv_shims_are_refused() -> None:
    with pytest.raises(ValueError, match="pyenv shim"):
        ExecutorSettings(python="/root/.pyenv/shims/python3")


def test_missing_interpreter_is_a_clear_error() -> None:
    with pytest.raises(SandboxUnavailable, match="not an executable Python"):
        describe_interpreter("/nonexistent/python3")


def test_root_never_runs_jails_as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("only meaningful when the server runs as root")
    pool = SandboxPool(SandboxConfig(slots=2, uid_base=61000))
    assert pool.sandbox_uids() == {61000, 61001}
    assert 0 not in pool.sandbox_uids()


def test_refuses_to_start_when_a_limit_cannot_be_enforced() -> None:
    # RLIMIT_NOFILE always has a finite hard limit (at most fs.nr_open).
    settings = ExecutorSettings(slots=1, nofile=1 << 40)
    with pytest.raises(SandboxUnavailable, match="COBALT_EXECUTOR_NOFILE cannot be enforced"):
        SandboxPool(settings.sandbox_config())


@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_a_blank_token_is_refused_at_start_up(blank: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A templated secret that came out empty must not open the executor to everyone."""
    monkeypatch.setenv("COBALT_EXECUTOR_AUTH_TOKEN", blank)
    monkeypatch.delenv("COBALT_EXECUTOR_NO_AUTH", raising=False)
    with pytest.raises(ValueError, match="COBALT_EXECUTOR_NO_AUTH"):
        ExecutorSettings(slots=1)
    result = CliRunner().invoke(
        app, ["executor", "serve"], env={"COBALT_EXECUTOR_AUTH_TOKEN": blank}
    )
    assert result.exit_code == EXIT_USAGE, result.output
    assert "AUTH_TOKEN is set but empty" in result.stderr
    assert "Traceback" not in result.output


def test_no_auth_must_be_asked_for_and_never_with_a_token(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COBALT_EXECUTOR_AUTH_TOKEN", "")
    monkeypatch.setenv("COBALT_EXECUTOR_NO_AUTH", "true")
    assert ExecutorSettings(slots=1).auth_token is None
    monkeypatch.setenv("COBALT_EXECUTOR_AUTH_TOKEN", "t0ken")
    with pytest.raises(ValueError, match="contradict"):
        ExecutorSettings(slots=1)


def test_an_empty_token_never_matches_an_anonymous_request() -> None:
    """The shared check never lets an empty header equal an empty configured token."""
    tokens = AccessTokens(write=SecretStr(""))
    assert tokens.scope_of("") is None
    assert tokens.scope_of("x") is None
