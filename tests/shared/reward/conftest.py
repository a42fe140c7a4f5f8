"""A tiny real tokenizer for the reward tests, built in-process (no downloads)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers

from cobalt.shared.reward import TokenizerCounter


def word_tokenizer() -> Tokenizer:
    """One token per word or run of punctuation (`Whitespace` pre-tokenizer, all [UNK])."""
    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return tokenizer


@pytest.fixture
def words() -> TokenizerCounter:
    return TokenizerCounter(word_tokenizer())


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """A policy-model-like directory holding only the tiny tokenizer.json."""
    directory = tmp_path / "policy"
    directory.mkdir()
    word_tokenizer().save(str(directory / "tokenizer.json"))
    return directory
