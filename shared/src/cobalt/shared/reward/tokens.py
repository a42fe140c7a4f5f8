"""Token counts for the reward's length terms, with the policy's own tokenizer.

docs/method.md: the research code counted with tiktoken's o200k_base; Cobalt counts with the
policy's tokenizer by default (its `tokenizer.json`, read by the `tokenizers` library, no
torch needed), so the limits (4,096 thinking, 2,048 answer, 512 after the code) mean what
the policy actually generates. Any object with `count_many` stands in (`TokenCounter`);
there is deliberately no character-count fallback, because characters are not tokens
and the limits would silently mean something else.

Counting from the sampler's token ids. Encoding 2,048 responses of 20,000 characters
costs 15-20 s of CPU, ten times the step's budget, and it is redundant: the sampler
already returned the ids the policy generated. For a byte-level BPE (Qwen, Llama 3,
SmolLM2, GPT-2: every policy this project targets) every vocabulary entry stands for a
fixed number of UTF-8 bytes, so the byte offset where each sampled token starts is a
cumulative sum, and a part's length is the number of tokens starting inside it: a few
numpy calls per response. The result is checked against the text (the token bytes must
add up to its UTF-8 length) and is None when it cannot be trusted, and the caller then
tokenizes. It counts what the policy generated, which can differ from encoding the part
on its own by a token where a token straddles a part's edge.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict
from tokenizers import Tokenizer, pre_tokenizers

from cobalt.shared.errors import InvalidInput
from cobalt.shared.settings import CobaltSettings

__all__ = [
    "TOKENIZER_FILE",
    "PartStarts",
    "RewardSettings",
    "SampledTokenCounter",
    "TokenCounter",
    "TokenLengths",
    "TokenizerCounter",
]

TOKENIZER_FILE = "tokenizer.json"
"""The file of a Hugging Face model directory that holds its tokenizer."""


@dataclass(frozen=True, slots=True)
class TokenLengths:
    """Token lengths of a response's parts: thinking T, answer A, after the code E."""

    think: int
    answer: int
    after_code: int


@dataclass(frozen=True, slots=True)
class PartStarts:
    """Where a response's parts begin and end, in characters (`FormatCheck` finds them).

    The thinking is [0, think_end), the answer [answer_start, end), the text after the
    code [after_code_start, end); the `</think>` tag between the first two is neither.
    """

    think_end: int
    answer_start: int
    after_code_start: int


class TokenCounter(Protocol):
    """Counts tokens of many texts at once (batched, so a tokenizer can use every core)."""

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """The number of tokens of each text, in order."""
        ...


@runtime_checkable
class SampledTokenCounter(TokenCounter, Protocol):
    """A counter that can also count a response's parts from the ids the policy sampled."""

    def count_parts_from_ids(
        self, response: str, token_ids: Sequence[int], parts: PartStarts
    ) -> TokenLengths | None:
        """T, A and E from `token_ids` (which decode to `response`); None: tokenize instead."""
        ...


class RewardSettings(CobaltSettings):
    """The reward's settings, from `COBALT_REWARD_*` variables."""

    model_config = SettingsConfigDict(env_prefix="COBALT_REWARD_", frozen=True, extra="ignore")

    tokenizer: Path | None = Field(
        default=None,
        validation_alias=AliasChoices("COBALT_REWARD_TOKENIZER", "COBALT_POLICY_TOKENIZER"),
    )
    """The model directory (or tokenizer.json) whose tokenizer counts the length terms:
    `COBALT_REWARD_TOKENIZER` when set (e.g. to study another tokenizer's limits), else the
    policy's, `COBALT_POLICY_TOKENIZER`, the same variable the bandit builder reads."""


class TokenizerCounter:
    """Counts tokens with a Hugging Face `tokenizers.Tokenizer`, no special tokens added."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._byte_lengths: npt.NDArray[np.int64] | None = None
        self._byte_lengths_known = False

    @classmethod
    def from_path(cls, path: str | Path) -> TokenizerCounter:
        """The counter of the model at `path`: its directory or its tokenizer.json.

        Raises:
            InvalidInput: there is no tokenizer.json there, or it cannot be read as one.
        """
        given = Path(path).expanduser()
        file = given / TOKENIZER_FILE if given.is_dir() else given
        if not file.is_file():
            raise InvalidInput(
                f"{given} has no {TOKENIZER_FILE}; give the policy model's directory "
                "(--tokenizer or COBALT_REWARD_TOKENIZER)"
            )
        try:
            tokenizer = Tokenizer.from_file(str(file))
        except Exception as exc:  # the Rust side raises a bare Exception on bad JSON
            raise InvalidInput(f"{file} is not a Hugging Face tokenizer: {exc}") from exc
        return cls(tokenizer)

    @classmethod
    def from_settings(cls, settings: RewardSettings) -> TokenizerCounter:
        """The counter `COBALT_REWARD_TOKENIZER` names.

        Raises:
            InvalidInput: the variable is unset or names no tokenizer.
        """
        if settings.tokenizer is None:
            raise InvalidInput(
                "the reward counts tokens with the policy's tokenizer: set "
                "COBALT_POLICY_TOKENIZER (or COBALT_REWARD_TOKENIZER) to the policy "
                "model's directory"
            )
        return cls.from_path(settings.tokenizer)

    def count(self, text: str) -> int:
        """The number of tokens of one text."""
        return self.count_many([text])[0]

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """The number of tokens of each text; the batch is encoded in parallel in Rust."""
        encodings = self._tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        return [len(encoding.ids) for encoding in encodings]

    def encode_many(self, texts: Sequence[str]) -> list[list[int]]:
        """The ids of each text (no special tokens), as a sampler would have produced them."""
        encodings = self._tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        return [encoding.ids for encoding in encodings]

    def count_parts_from_ids(
        self, response: str, token_ids: Sequence[int], parts: PartStarts
    ) -> TokenLengths | None:
        """T, A and E counted from the sampled ids: a token belongs to the part it starts in.

        Returns None when the tokenizer is not a byte-level BPE, an id is outside its
        vocabulary, or the ids' bytes do not add up to `response` (then they are not the
        ids of this text, and the caller tokenizes it). Special tokens (end of turn) count
        for nothing: the sampler leaves them out of the text.
        """
        byte_lengths = self.byte_lengths()
        if byte_lengths is None or not len(token_ids):
            return None
        ids = np.asarray(token_ids, dtype=np.int64)
        if int(ids.min()) < 0 or int(ids.max()) >= len(byte_lengths):
            return None
        sizes = byte_lengths[ids]
        ends = np.cumsum(sizes)
        if int(ends[-1]) != len(response.encode("utf-8")):
            return None
        starts = (ends - sizes)[sizes > 0]  # (tokens,) ascending byte offsets

        def byte_offset(characters: int) -> int:
            return len(response[:characters].encode("utf-8"))

        first_answer, first_after = np.searchsorted(
            starts, [byte_offset(parts.answer_start), byte_offset(parts.after_code_start)]
        )
        return TokenLengths(
            think=int(np.searchsorted(starts, byte_offset(parts.think_end))),
            answer=len(starts) - int(first_answer),
            after_code=len(starts) - int(first_after),
        )

    def byte_lengths(self) -> npt.NDArray[np.int64] | None:
        """UTF-8 bytes each id stands for (special tokens: 0); None unless byte-level BPE.

        Built once per counter (a 150,000-token vocabulary takes about 0.1 s).
        """
        if not self._byte_lengths_known:
            self._byte_lengths = _byte_level_lengths(self._tokenizer)
            self._byte_lengths_known = True
        return self._byte_lengths


def _is_byte_level(decoder: Any) -> bool:
    if not isinstance(decoder, dict):
        return False
    if decoder.get("type") == "ByteLevel":
        return True
    return decoder.get("type") == "Sequence" and any(
        _is_byte_level(part) for part in decoder.get("decoders", [])
    )


def _byte_level_lengths(tokenizer: Tokenizer) -> npt.NDArray[np.int64] | None:
    """The byte length of every id of a byte-level BPE: one byte per character of its
    vocabulary entry (the ByteLevel alphabet maps the 256 bytes to 256 characters)."""
    if not _is_byte_level(json.loads(tokenizer.to_str()).get("decoder")):
        return None
    alphabet = set(pre_tokenizers.ByteLevel.alphabet())
    added = tokenizer.get_added_tokens_decoder()
    vocabulary = tokenizer.get_vocab(with_added_tokens=True)
    lengths = np.zeros(max(vocabulary.values(), default=-1) + 1, dtype=np.int64)
    for token, token_id in vocabulary.items():
        if token_id in added:
            special = added[token_id].special
            lengths[token_id] = 0 if special else len(added[token_id].content.encode("utf-8"))
        elif set(token) <= alphabet:
            lengths[token_id] = len(token)
        else:
            return None  # not the byte alphabet after all: offsets would be wrong
    return lengths
