"""Thinking removal, program extraction and the history cap (docs/method.md, Rollouts)."""

from __future__ import annotations

import pytest

from cobalt.shared.extraction import (
    answer_part,
    extract_program,
    fenced_blocks,
    history_text,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("plain answer, no thinking", "plain answer, no thinking"),
        ("<think>a</think>middle<think>b</think>final", "final"),
        ("<think>a</think>x</think>y", "y"),
        ("<think>still thinking ```python\nprint(1)\n```", ""),
        ("thinking opened in the prompt</think>after", "after"),
        ("<think>done</think>", ""),
    ],
)
def test_answer_part_is_the_text_after_the_last_think_close(text: str, expected: str) -> None:
    assert answer_part(text) == expected


def test_the_program_is_the_last_code_block() -> None:
    text = "```python\nprint(1)\n```\nthen better:\n```py\nprint(2)\n```\nDone."
    assert extract_program(text) == "print(2)\n"


@pytest.mark.parametrize("tag", ["", "python", "py", "python3", "py3", "Python", "python  "])
def test_untagged_and_python_tagged_blocks_are_programs(tag: str) -> None:
    assert extract_program(f"Here:\n```{tag}\nx = 3\n```\n") == "x = 3\n"


def test_a_block_in_another_language_is_never_the_program() -> None:
    text = "```python\nprint(sum(map(int, input().split())))\n```\nRun:\n```text\n3\n```"
    assert extract_program(text) == "print(sum(map(int, input().split())))\n"
    assert extract_program("```bash\npython3 main.py\n```") is None


@pytest.mark.parametrize(
    "text",
    [
        "No code at all.",
        "<think>```python\nprint(1)\n```</think>The answer is 4.",
        "<think>```python\nprint(1)\n```\nstill thinking when the tokens ran out",
        "cut off:\n```python\nprint(1)",
        "```python\n   \n```",
        "inline ```python print(1)``` is not a fence",
    ],
)
def test_answers_without_a_program(text: str) -> None:
    assert extract_program(text) is None


def test_thinking_blocks_are_ignored_when_the_answer_has_its_own() -> None:
    text = "<think>```python\nprint('draft')\n```</think>```python\nprint('final')\n```"
    assert extract_program(text) == "print('final')\n"


def test_an_unterminated_last_fence_leaves_the_last_complete_program() -> None:
    text = "```python\nprint(1)\n```\nA faster version:\n```python\nimport sys\nprint("
    assert extract_program(text) == "print(1)\n"


def test_a_fence_mentioned_in_prose_does_not_shift_the_blocks() -> None:
    # A whole-text regex would pair the inline ``` with the real opening fence.
    text = "Wrap code in ``` fences.\n```python\nprint(2)\n```\n"
    assert extract_program(text) == "print(2)\n"


def test_longer_fences_hold_backtick_lines_and_indented_fences_are_dedented() -> None:
    text = "````python\ns = '''\n```\n'''\nprint(s)\n````"
    assert extract_program(text) == "s = '''\n```\n'''\nprint(s)\n"
    listed = "1. The program:\n   ```python\n   for i in range(2):\n       print(i)\n   ```\n"
    assert extract_program(listed) == "for i in range(2):\n    print(i)\n"
    assert extract_program("```python\r\nprint(1)\r\n```\r\n") == "print(1)\r\n"


def test_fenced_blocks_report_where_each_block_is() -> None:
    text = "a\n```py\nx\n```\nb\n```\ny"
    first, second = fenced_blocks(text)
    assert (first.language, first.body, first.is_closed) == ("py", "x\n", True)
    assert text[first.start : first.end] == "```py\nx\n```\n"
    assert (second.language, second.body, second.is_closed) == ("", "y", False)
    assert second.end == len(text)


def test_history_keeps_the_answer_part_whole_when_it_fits() -> None:
    assert history_text("<think>x</think>\n short answer \n") == "short answer"
    assert history_text("<think>never finished") == ""
    assert history_text("anything", cap_chars=0) == ""
    with pytest.raises(ValueError, match="cap_chars"):
        history_text("anything", cap_chars=-1)


def test_history_keeps_the_end_of_a_long_answer_where_the_program_is() -> None:
    program = "```python\nprint(1)\n```"
    text = "<think>" + "THINKING" * 50 + "</think>" + "x" * 7000 + "\n" + program
    kept = history_text(text)
    assert len(kept) == 6000
    assert kept.endswith(program) and "THINKING" not in kept
    assert history_text(text, cap_chars=100).endswith(program)


def test_history_drops_the_rest_of_an_earlier_block_the_cap_cuts_through() -> None:
    early = "```python\n" + "# first try\n" * 100 + "```\n"
    program = "```python\nprint(2)\n```"
    text = "intro\n" + early + "Second try:\n" + program
    kept = history_text(text, cap_chars=200)
    assert kept == "Second try:\n" + program
    fence_lines = [line for line in kept.splitlines() if line.startswith("```")]
    assert len(fence_lines) % 2 == 0  # no orphan fence flips code and prose


def test_history_cuts_inside_the_program_only_when_it_alone_is_too_long() -> None:
    program = "```python\n" + "x = 1\n" * 200 + "print(x)\n```"
    kept = history_text("Here it is:\n" + program + "\nDone.", cap_chars=50)
    assert len(kept) <= 50
    assert kept.endswith("print(x)\n```\nDone.")
