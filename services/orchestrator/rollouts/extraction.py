"""What a model's answer contains: its answer part, its program, what the history keeps.

Reasoning models think inside `<think> ... </think>`. METHOD.md: the program is the last
fenced code block of the answer part (the text after the LAST `</think>`), and the
conversation history keeps only the answer part, capped at 6000 characters. Public
feedback and hidden evaluation both use `extract_program`'s result, so the two can never
disagree about which program was judged (a research-code bug the method notes).
"""

from __future__ import annotations

import re

__all__ = ["THINK_END", "THINK_START", "answer_part", "extract_program", "history_text"]

THINK_START = "<think>"
THINK_END = "</think>"

# ``` + optional info string (python, py, python3, ...) + newline, body, closing ```.
# An unterminated final fence is not a block: the answer was cut off (max_tokens), and a
# truncated program would only produce a misleading error.
_FENCED_BLOCK = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)


def answer_part(text: str) -> str:
    """The text after the last `</think>`; "" if thinking began and never ended."""
    if THINK_END in text:
        return text.rsplit(THINK_END, 1)[1]
    if THINK_START in text:
        return ""
    return text


def extract_program(text: str) -> str | None:
    """The last fenced code block of the answer part, or None when there is none."""
    blocks = _FENCED_BLOCK.findall(answer_part(text))
    if not blocks or not blocks[-1].strip():
        return None
    program: str = blocks[-1]
    return program


def history_text(text: str, cap_chars: int = 6000) -> str:
    """What an assistant turn contributes to the conversation: the answer part, capped.

    When the answer is longer than `cap_chars`, its END is kept: the program (the last
    code block) is what the next turn has to fix, and it comes last.
    """
    answer = answer_part(text).strip()
    if cap_chars <= 0:
        return ""
    return answer if len(answer) <= cap_chars else answer[-cap_chars:]
