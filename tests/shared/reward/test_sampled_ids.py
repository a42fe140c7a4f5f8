"""Counting a response's parts from the ids the policy sampled (`count_parts_from_ids`)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from cobalt.shared.reward import (
    PartStarts,
    ScoreInput,
    TokenizerCounter,
    TokenLengths,
    check_format,
    score_responses,
)

RESPONSES = [
    "<think>Wait, the loop is wrong; verify n = 0.</think>Here it is.\n"
    "```python\nprint(int(input()) * 2)\n```\nIt doubles the number.",
    "<think>Café ünïcode ✓ 🙂 however</think>\n```python\nprint('é')\n```\n",
    "No thinking at all.\n```python\nprint(1)\n```",
    "<think>Ran out of tokens while thinking about",
]


def byte_level_tokenizer() -> Tokenizer:
    """A byte-level BPE like the policies' (Qwen, Llama 3): `</think>` an added token and
    `<|im_end|>` a special one, as in Qwen3's tokenizer."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tokenizer.train_from_iterator(RESPONSES * 5, trainer=trainer)
    tokenizer.add_tokens([AddedToken("</think>", special=False)])
    tokenizer.add_special_tokens(["<|im_end|>"])
    return tokenizer


@pytest.fixture(scope="module")
def bpe() -> TokenizerCounter:
    return TokenizerCounter(byte_level_tokenizer())


def starting_in(offsets: Sequence[tuple[int, int]], start: int, end: int) -> int:
    """Tokens whose first character lies in [start, end) (from the tokenizer's offsets)."""
    return sum(1 for first, last in offsets if start <= first < end and last > first)


@pytest.mark.parametrize("response", RESPONSES)
def test_each_part_counts_the_sampled_tokens_that_start_in_it(
    bpe: TokenizerCounter, response: str
) -> None:
    tokenizer = byte_level_tokenizer()
    encoding = tokenizer.encode(response, add_special_tokens=False)
    parts = check_format(response).parts
    end_of_turn = tokenizer.token_to_id("<|im_end|>")
    got = bpe.count_parts_from_ids(response, [*encoding.ids, end_of_turn], parts)
    assert got == TokenLengths(
        think=starting_in(encoding.offsets, 0, parts.think_end),
        answer=starting_in(encoding.offsets, parts.answer_start, len(response)),
        after_code=starting_in(encoding.offsets, parts.after_code_start, len(response)),
    )


def test_parts_are_where_check_format_cut_them() -> None:
    response = RESPONSES[0]
    check = check_format(response)
    parts = check.parts
    assert response[: parts.think_end] == check.think
    assert response[parts.answer_start :] == check.answer
    assert response[parts.after_code_start :] == check.after_code == "It doubles the number."


def test_ids_that_are_not_the_texts_or_not_byte_level_give_none(bpe: TokenizerCounter) -> None:
    response = RESPONSES[0]
    parts = check_format(response).parts
    other = byte_level_tokenizer().encode(RESPONSES[1], add_special_tokens=False).ids
    assert bpe.count_parts_from_ids(response, other, parts) is None
    assert bpe.count_parts_from_ids(response, [10**6], parts) is None
    assert bpe.count_parts_from_ids(response, [], parts) is None
    words = Tokenizer(models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    assert TokenizerCounter(words).count_parts_from_ids(response, [0, 0], parts) is None


class EncodingRefused(TokenizerCounter):
    """Fails if asked to tokenize: proves the sampled ids were used."""

    def count_many(self, texts: Sequence[str]) -> list[int]:
        raise AssertionError(f"tokenized {len(texts)} texts")


def test_a_step_with_sampled_ids_tokenizes_nothing_and_scores_the_same() -> None:
    tokenizer = byte_level_tokenizer()
    items = [
        ScoreInput(text, tests_passed=1, tests_total=2, prev_best=0.0) for text in RESPONSES[:3]
    ]
    with_ids = [
        ScoreInput(
            item.response,
            item.tests_passed,
            item.tests_total,
            item.prev_best,
            token_ids=tokenizer.encode(item.response, add_special_tokens=False).ids,
        )
        for item in items
    ]
    from_ids = score_responses(with_ids, tokens=EncodingRefused(tokenizer))
    encoded = score_responses(items, tokens=TokenizerCounter(tokenizer))
    for ids_breakdown, text_breakdown in zip(from_ids, encoded, strict=True):
        assert ids_breakdown.think_tokens is not None
        assert ids_breakdown.total == text_breakdown.total
        # A token straddling a part's edge may count once more or less than the part alone.
        assert abs(ids_breakdown.think_tokens - (text_breakdown.think_tokens or 0)) <= 1
        assert abs((ids_breakdown.answer_tokens or 0) - (text_breakdown.answer_tokens or 0)) <= 1


def test_ids_of_another_text_fall_back_to_tokenizing(bpe: TokenizerCounter) -> None:
    wrong_ids = byte_level_tokenizer().encode("something else").ids
    item = ScoreInput(RESPONSES[0], 2, 2, 0.0, token_ids=wrong_ids)
    [fallback] = score_responses([item], tokens=bpe)
    [plain] = score_responses([ScoreInput(RESPONSES[0], 2, 2, 0.0)], tokens=bpe)
    assert fallback == plain


def test_part_starts_of_a_response_without_program() -> None:
    assert check_format(RESPONSES[3]).parts == PartStarts(
        think_end=0, answer_start=len(RESPONSES[3]), after_code_start=len(RESPONSES[3])
    )
