"""Token counts for the reward's length terms, with the policy's own tokenizer.

METHOD.md: the research code counted with tiktoken's o200k_base; Cobalt counts with the
policy's tokenizer by default (its `tokenizer.json`, read by the `tokenizers` library, no
torch needed), so the limits (4096 thinking, 2048 answer, 512 after the code) mean what
the policy actually generates. Any object with `count(text) -> int` can stand in.
"""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer

from cobalt.shared.errors import InvalidInput
from cobalt.shared.settings import CobaltSettings

__all__ = ["RewardSettings", "TokenizerCounter"]


class RewardSettings(CobaltSettings):
    """`COBALT_POLICY_TOKENIZER`: the policy model's directory, for token counts."""

    policy_tokenizer: Path | None = None


class TokenizerCounter:
    """Counts tokens with a Hugging Face `tokenizer.json` (no special tokens added)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer

    @classmethod
    def from_dir(cls, model_dir: str | Path) -> TokenizerCounter:
        """The counter of the model in `model_dir`.

        Raises:
            InvalidInput: the directory has no tokenizer.json.
        """
        path = Path(model_dir).expanduser()
        file = path / "tokenizer.json" if path.is_dir() else path
        if not file.is_file():
            raise InvalidInput(
                f"{path} has no tokenizer.json; give the policy model's directory "
                "(--tokenizer or COBALT_POLICY_TOKENIZER)"
            )
        return cls(Tokenizer.from_file(str(file)))

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids) if text else 0
