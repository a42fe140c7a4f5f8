from __future__ import annotations

import pytest

from cobalt.shared.text import truncate_middle


def test_short_text_is_untouched() -> None:
    assert truncate_middle("hello", 400) == "hello"


@pytest.mark.parametrize("limit", [60, 100, 400])
def test_long_text_keeps_head_and_tail_within_limit(limit: int) -> None:
    text = "H" * 500 + "M" * 2000 + "T" * 500
    cut = truncate_middle(text, limit)
    assert len(cut) <= limit
    assert cut.startswith("H") and cut.endswith("T")
    omitted = int(cut.split("...[")[1].split(" ")[0])
    assert omitted == len(text) - (len(cut) - len(cut.split("\n")[1]) - 2)


def test_zero_limit_keeps_nothing() -> None:
    assert truncate_middle("abc", 0) == ""
