"""Executor fixtures: the real sandbox over HTTP in both uid modes."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.executor.nonroot import nonroot_executor


@pytest.fixture(scope="session")
def nonroot_executor_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real executor server run as a non-root user (every slot under its uid)."""
    log = tmp_path_factory.mktemp("nonroot-executor") / "server.log"
    with nonroot_executor(log) as url:
        yield url


@pytest.fixture(scope="session", params=["per-slot-uids", "shared-uid"])
def executor_http(request: pytest.FixtureRequest, executor_url: str) -> Iterator[httpx.Client]:
    """An HTTP client for the executor in each uid mode: as root with one uid per slot
    (the shared test pool), and as a non-root server whose slots share its uid."""
    url = (
        executor_url
        if request.param == "per-slot-uids"
        else request.getfixturevalue("nonroot_executor_url")
    )
    with httpx.Client(base_url=url, timeout=120) as client:
        yield client
