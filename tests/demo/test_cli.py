"""`cobalt demo` and `cobalt up` when something is wrong: one clear line and a non-zero exit,
and `cobalt up` started and stopped on SQLite (no vLLM). Bad options and settings, refused
before anything starts, are checked in this process; the rest run `cobalt` as a process."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from cobalt.demo.processes import port_is_free
from cobalt.shared.ports import free_port
from tests.support.cli import cobalt_here
from tests.support.up import COBALT, cobalt_up

TRAINER_PYTHON = Path(__file__).resolve().parents[2] / ".venv-trainer" / "bin" / "python"
INFERENCE_PYTHON = Path(__file__).resolve().parents[2] / ".venv-inference" / "bin" / "python"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("COBALT_")}
    return {**env, **extra}


def _cobalt(
    *args: str, env: dict[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COBALT, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--turns", "0"], "--turns must be at least 1"),
        (["--group-size", "1"], "--group-size must be at least 2"),
        (["--inference-url", "http://127.0.0.1:1"], "--inference-url needs --model"),
        (["--store", "not a url"], "--store 'not a url' is not a database URL"),
    ],
)
def test_bad_demo_options_exit_2_saying_which(
    args: list[str], message: str, tmp_path: Path
) -> None:
    done = cobalt_here(_env(), "demo", "--work-dir", str(tmp_path), *args)

    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and message in done.stderr


def test_a_missing_model_file_fails_the_demo_with_the_fix(tmp_path: Path) -> None:
    # An inference environment without SmolLM2's GGUF file: a venv of its own (so its
    # share/cobalt/models is empty) that sees .venv-inference's packages.
    where = (
        "import sys, sysconfig; "
        "print(sys._base_executable, sys.prefix, sysconfig.get_paths()['purelib'])"
    )
    base_python, prefix, packages = subprocess.run(
        [str(INFERENCE_PYTHON), "-c", where], capture_output=True, text=True, check=True
    ).stdout.split()
    environment = tmp_path / "inference-env"
    subprocess.run([base_python, "-m", "venv", "--without-pip", str(environment)], check=True)
    (environment / Path(packages).relative_to(prefix) / "inference-packages.pth").write_text(
        f"import site; site.addsitedir({packages!r})\n"
    )
    fake = environment / "bin" / "python"

    done = _cobalt(
        "demo", "--work-dir", str(tmp_path / "work"),
        env=_env(COBALT_INFERENCE_PYTHON=str(fake)), timeout=300,
    )  # fmt: skip

    assert done.returncode == 1, done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("error: could not convert SmolLM2 from its GGUF file")
    assert "GGUF file is not in" in first and "make setup" in first
    assert not (tmp_path / "work" / "cobalt.db").exists()  # failed before starting anything


def test_a_missing_trainer_environment_fails_before_starting_anything(tmp_path: Path) -> None:
    done = _cobalt(
        "demo", "--work-dir", str(tmp_path),
        env=_env(COBALT_TRAINER_PYTHON=str(tmp_path / "nowhere" / "python")),
    )  # fmt: skip

    assert done.returncode == 1
    assert "the trainer environment" in done.stderr and "make setup" in done.stderr


def test_the_demo_says_first_where_it_stores_and_never_uses_the_environments_store(
    tmp_path: Path,
) -> None:
    team = tmp_path / "team.db"
    done = _cobalt(
        "demo", "--work-dir", str(tmp_path / "work"),
        env=_env(
            XDG_DATA_HOME=str(tmp_path / "xdg"),
            COBALT_DATABASE_URL=f"sqlite:///{team}",
            COBALT_TRAINER_PYTHON=str(tmp_path / "nowhere" / "python"),  # fails at set-up
        ),
    )  # fmt: skip

    assert done.returncode == 1 and "the trainer environment" in done.stderr
    first, note = done.stdout.splitlines()[:2]
    assert first.startswith(f"store: sqlite:///{tmp_path / 'xdg' / 'cobalt' / 'cobalt.db'} ")
    assert note.startswith("note: COBALT_DATABASE_URL is set but `cobalt demo` does not use it")
    assert not team.exists()


def test_up_refuses_workers_without_redis(tmp_path: Path) -> None:
    done = cobalt_here(_env(), "up", "--workers", "2", "--log-dir", str(tmp_path))

    assert done.returncode == 2
    assert "--workers needs COBALT_REDIS_URL" in done.stderr


def test_up_refuses_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = cobalt_here(
            _env(COBALT_EXECUTOR_PORT=str(port)), "up", "--no-inference", "--log-dir", str(tmp_path)
        )

    assert done.returncode == 2
    assert f"port {port} of the executor is in use; set COBALT_EXECUTOR_PORT" in done.stderr


@pytest.mark.slow
def test_up_starts_the_services_on_sqlite_and_ctrl_c_stops_them(tmp_path: Path) -> None:
    executor_port, api_port = free_port(), free_port()
    env = _env(
        COBALT_DATABASE_URL=f"sqlite:///{tmp_path / 'cobalt.db'}",
        COBALT_EXECUTOR_PORT=str(executor_port),
        COBALT_ORCHESTRATOR_PORT=str(api_port),
        COBALT_EXECUTOR_SLOTS="1",
    )
    with cobalt_up("--no-inference", "--log-dir", str(tmp_path / "logs"), env=env) as up:
        with httpx.Client(timeout=5) as client:
            assert client.get(f"http://127.0.0.1:{executor_port}/readyz").status_code == 200
            assert client.get(f"http://127.0.0.1:{api_port}/ui/").status_code == 200
            assert client.get(f"http://127.0.0.1:{api_port}/v1/datasets").status_code == 200
    stderr = up.stderr

    assert up.process.returncode == 0, stderr
    assert f"web UI: http://127.0.0.1:{api_port}/ui/" in stderr
    assert "stopped every service" in stderr
    assert port_is_free(executor_port) and port_is_free(api_port)
    assert (tmp_path / "logs" / "executor.log").is_file()
