"""Fixtures of the training tests: a scripted model, a policy directory, a bandit dataset.

The "model" answers choice 0 wrong (n + 1), choice 1 right (2n), choice 2 with no code;
the problem has 2 public and 2 hidden tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.orm import Session, sessionmaker
from tokenizers import Tokenizer, models, pre_tokenizers

from cobalt.orchestrator.api.app import create_app
from cobalt.orchestrator.settings import OrchestratorSettings
from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.serving import serve_asgi
from tests.support.training import answer, bandit_dataset


@pytest.fixture
def model() -> Iterator[tuple[FakeOpenAI, str]]:
    fake = FakeOpenAI(responder=answer)
    with serve_fake_openai(fake) as url:
        yield fake, url


@pytest.fixture
def policy_dir(tmp_path: Path) -> Path:
    """A policy model directory as far as the reward needs it: its tokenizer.json."""
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    return tmp_path


@pytest.fixture
def orchestrator(
    store_url: str,
    executor_url: str,
    sessions: sessionmaker[Session],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[str, httpx.Client]]:
    """The orchestrator API over real HTTP (its URL and a client), with the training
    fixtures' bandit dataset "ctx" in its store and the real executor behind it."""
    bandit_dataset(sessions)
    monkeypatch.setenv("COBALT_EXECUTOR_URL", executor_url)
    settings = OrchestratorSettings(database_url=store_url, redis_url=None)
    with serve_asgi(create_app(settings)) as url, httpx.Client(base_url=url, timeout=60) as api:
        yield url, api
