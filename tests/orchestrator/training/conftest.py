"""Fixtures of the training tests: a scripted model, a policy directory, a bandit dataset.

The "model" answers choice 0 wrong (n + 1), choice 1 right (2n), choice 2 with no code;
the problem has 2 public and 2 hidden tests.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from tests.fakes.openai_server import FakeOpenAI, serve_fake_openai
from tests.support.training import answer


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
