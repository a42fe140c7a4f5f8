"""An environment with only the executor's distributions: it serves, and holds nothing else.

The executor image installs cobalt-shared[http] and cobalt-executor and nothing of the other
services (deploy/docker/executor.Dockerfile). This test builds the same environment on the
host: a fresh venv in a temporary directory, the two distributions installed as wheels (not
editable) from a copy of their folders at the versions of requirements/constraints.txt, then

- `pip check` passes there, and `cobalt` has exactly the executor's commands;
- `cobalt executor serve`, started from that venv on a free port, judges a passing and a
  failing program through a real POST /v1/execute;
- sqlalchemy, openai and torch (the orchestrator's and trainer's) cannot be imported there.

pip's cache (warm after `make setup`) provides the wheels, so this is offline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cobalt.shared.ports import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DISTRIBUTIONS = {"shared": "shared[http]", "services/executor": "executor"}
INSTALL_TIMEOUT_S = 900
READY_TIMEOUT_S = 60
TOKEN = "executor-alone-token"
PLUS_ONE = "print(int(input()) + 1)"
MINUS_ONE = "print(int(input()) - 1)"


def _run(*args: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv holding only cobalt-shared[http] and cobalt-executor, installed from wheels."""
    base = tmp_path_factory.mktemp("executor-alone")
    sources = base / "src"
    for folder in DISTRIBUTIONS:
        # A copy, so that building the wheels writes no build/ or egg-info into the checkout.
        shutil.copytree(
            ROOT / folder,
            sources / Path(folder).name,
            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"),
        )
    venv = base / "venv"
    created = _run(sys.executable, "-m", "venv", venv)
    assert created.returncode == 0, created.stderr
    installed = _run(
        venv / "bin" / "pip", "install", "--quiet", "--disable-pip-version-check",
        "-c", ROOT / "requirements" / "constraints.txt",
        f"{sources / 'shared'}[http]", sources / "executor",
        timeout=INSTALL_TIMEOUT_S,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    # Jails run as other uids when the server is root; they must reach nothing here, but
    # the server's own files must stay readable along the path (pytest's base is 0700).
    for directory in (base, *base.parents):
        if directory == Path("/"):
            break
        if not os.stat(directory).st_mode & 0o005:
            os.chmod(directory, os.stat(directory).st_mode | 0o005)
    return venv


@pytest.fixture(scope="module")
def server(venv: Path) -> Iterator[str]:
    """`cobalt executor serve` from the venv, on a free port, until /readyz says 200."""
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("COBALT_", "PYTHON", "VIRTUAL_ENV"))
    }
    env.update(
        COBALT_EXECUTOR_PORT=str(port),
        COBALT_EXECUTOR_SLOTS="1",
        COBALT_EXECUTOR_AUTH_TOKEN=TOKEN,
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
    )
    log_path = venv.parent / "executor.log"
    with log_path.open("wb") as log:
        # A file, not a pipe: nobody reads the log while the server runs.
        process = subprocess.Popen(
            [venv / "bin" / "cobalt", "executor", "serve"],
            env=env,
            cwd=venv,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not _ready(url):
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                process.wait(timeout=30)
                output = log_path.read_text(errors="replace")
                pytest.fail(f"cobalt executor serve did not become ready:\n{output[-4000:]}")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def test_pip_check_passes(venv: Path) -> None:
    done = _run(venv / "bin" / "pip", "check", "--disable-pip-version-check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_only_the_executor_and_shared_distributions_are_cobalts(venv: Path) -> None:
    code = (
        "import importlib.metadata as m\n"
        "print(sorted(d.metadata['Name'] for d in m.distributions()"
        " if d.metadata['Name'].startswith('cobalt')))\n"
        "print(sorted(p.name for p in m.entry_points(group='cobalt.commands')))\n"
    )
    done = _run(venv / "bin" / "python", "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "['cobalt-executor', 'cobalt-shared']",
        "['exec', 'executor']",
    ]


@pytest.mark.parametrize("module", ["sqlalchemy", "openai", "torch"])
def test_other_services_libraries_cannot_be_imported(venv: Path, module: str) -> None:
    done = _run(venv / "bin" / "python", "-c", f"import {module}")
    assert done.returncode != 0
    assert f"No module named '{module}'" in done.stderr


def test_serves_execute_with_a_passing_and_a_failing_program(server: str) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    tests = [
        {"stdin": "1\n", "expected_stdout": "2"},
        {"stdin": "41\n", "expected_stdout": "42"},
    ]
    with httpx.Client(base_url=server, headers=headers, timeout=60) as client:
        passing = client.post("/v1/execute", json={"code": PLUS_ONE, "tests": tests})
        failing = client.post("/v1/execute", json={"code": MINUS_ONE, "tests": tests})
    unauthorised = httpx.post(server + "/v1/execute", json={"code": PLUS_ONE, "tests": tests})
    assert passing.status_code == 200, passing.text
    assert failing.status_code == 200, failing.text
    assert (passing.json()["passed"], passing.json()["total"]) == (2, 2)
    assert [r["verdict"] for r in passing.json()["results"]] == ["accepted", "accepted"]
    assert failing.json()["passed"] == 0
    assert [r["verdict"] for r in failing.json()["results"]] == ["wrong_answer", "wrong_answer"]
    assert unauthorised.status_code == 401
