"""Token counting with a `tokenizer.json`, and the settings that name it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cobalt.shared.errors import InvalidInput
from cobalt.shared.reward import RewardSettings, TokenizerCounter


def test_counts_with_the_tokenizer_of_a_model_directory(model_dir: Path) -> None:
    counter = TokenizerCounter.from_path(model_dir)
    assert counter.count("wait, the loop is wrong") == 6  # 5 words and a comma
    assert counter.count_many(["a b", "", "x = 1"]) == [2, 0, 3]
    assert TokenizerCounter.from_path(model_dir / "tokenizer.json").count("a b c") == 3


def test_a_directory_without_tokenizer_json_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match="no tokenizer.json.*--tokenizer"):
        TokenizerCounter.from_path(tmp_path)
    broken = tmp_path / "tokenizer.json"
    broken.write_text("{not json")
    with pytest.raises(InvalidInput, match="not a Hugging Face tokenizer"):
        TokenizerCounter.from_path(tmp_path)


def test_settings_default_to_the_policy_tokenizer_and_the_reward_variable_overrides_it(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COBALT_REWARD_TOKENIZER", raising=False)
    monkeypatch.delenv("COBALT_POLICY_TOKENIZER", raising=False)
    with pytest.raises(InvalidInput, match="COBALT_POLICY_TOKENIZER"):
        TokenizerCounter.from_settings(RewardSettings())
    monkeypatch.setenv("COBALT_POLICY_TOKENIZER", str(model_dir))
    assert RewardSettings().tokenizer == model_dir
    assert TokenizerCounter.from_settings(RewardSettings()).count("one two") == 2
    monkeypatch.setenv("COBALT_REWARD_TOKENIZER", str(tmp_path))
    assert RewardSettings().tokenizer == tmp_path
