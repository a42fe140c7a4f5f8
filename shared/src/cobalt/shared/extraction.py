"""What a model's answer contains: its answer part, its program, what the history keeps.

Shared because rollouts (feedback, history) and the reward (format term, "no code block")
must read a response the same way.

Reasoning models think inside `<think> ... </think>`. docs/method.md: the program is the last
fenced code block of the answer part (the text after the LAST `</think>`), and the
conversation history keeps only the answer part, capped (`defaults.HISTORY_CAP_CHARS`). Public
feedback and hidden evaluation both judge `extract_program`'s result, so the two can never
disagree about which program was judged (a research-code bug the method notes).

Fences are found line by line, the way Markdown renders them (a line that is three or more
backticks plus an optional language tag opens a block; a line of at least as many
backticks closes it), not with a regex over the whole text: a regex pairs any two runs of
backticks, so a "```" mentioned inside a sentence would shift every later block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cobalt.shared.defaults import HISTORY_CAP_CHARS

__all__ = [
    "PYTHON_LANGUAGE_TAGS",
    "THINK_CLOSE",
    "THINK_OPEN",
    "FencedBlock",
    "answer_part",
    "extract_program",
    "fenced_blocks",
    "history_text",
]

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"

"""Characters of an answer part an assistant message keeps in the history (docs/method.md)."""

PYTHON_LANGUAGE_TAGS = frozenset({"", "python", "python3", "py", "py3"})
"""Language tags (lower-cased) of a block that can be the program; "" is an untagged block.

A block tagged with another language (```text, ```bash, ```json) is sample output or a
shell command the model showed next to its program, so it is never judged as the program,
even when it comes last.
"""

_OPENING_FENCE = re.compile(r"(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<info>[^`]*)")
_CLOSING_FENCE = re.compile(r"[ \t]*(?P<fence>`{3,})[ \t]*")


@dataclass(frozen=True, slots=True)
class FencedBlock:
    """One fenced code block of a text, with where it sits in that text."""

    language: str
    """First word of the info string, lower-cased; "" when the fence has none."""
    body: str
    """The lines between the fences, with the fence's own indentation removed."""
    start: int
    """Offset of the opening fence line."""
    end: int
    """Offset just after the closing fence line (the text's length when unterminated)."""
    is_closed: bool
    """False when the text ended before a closing fence (the answer was cut off)."""


def answer_part(text: str) -> str:
    """The part of a response after the model finished thinking.

    Args:
        text: A raw model response.

    Returns:
        The text after the last `</think>`; "" when `<think>` opened but never closed
        (the model ran out of tokens while thinking, so it has not answered yet); the
        whole text when it has neither tag (a model that does not think).
    """
    if THINK_CLOSE in text:
        return text.rsplit(THINK_CLOSE, 1)[1]
    if THINK_OPEN in text:
        return ""
    return text


def _dedent_line(line: str, indent: str) -> str:
    """Remove a fence's indentation from one of its body lines (Markdown's rule).

    A block indented inside a list item carries that indentation on every line; left in,
    the program would fail with an IndentationError that is an artefact of the Markdown.
    """
    if line.startswith(indent):
        return line[len(indent) :]
    return line.lstrip(" \t")


def fenced_blocks(text: str) -> list[FencedBlock]:
    """Every fenced code block of `text`, in order, including an unterminated last one.

    Args:
        text: Markdown-ish text, usually an answer part.

    Returns:
        The blocks in the order they appear. Everything after an opening fence that is
        never closed belongs to that (unterminated) block.
    """
    blocks: list[FencedBlock] = []
    offset = 0
    opening: re.Match[str] | None = None
    start = 0
    body: list[str] = []
    for line in text.splitlines(keepends=True):
        content = line.rstrip("\r\n")
        if opening is None:
            opening = _OPENING_FENCE.fullmatch(content)
            if opening is not None:
                start, body = offset, []
        else:
            closing = _CLOSING_FENCE.fullmatch(content)
            if closing and len(closing["fence"]) >= len(opening["fence"]):
                blocks.append(_block(opening, body, start, offset + len(line), is_closed=True))
                opening = None
            else:
                body.append(_dedent_line(line, opening["indent"]))
        offset += len(line)
    if opening is not None:
        blocks.append(_block(opening, body, start, len(text), is_closed=False))
    return blocks


def _block(
    opening: re.Match[str], body: list[str], start: int, end: int, *, is_closed: bool
) -> FencedBlock:
    words = opening["info"].split()
    return FencedBlock(
        language=words[0].lower() if words else "",
        body="".join(body),
        start=start,
        end=end,
        is_closed=is_closed,
    )


def _program_block(answer: str) -> FencedBlock | None:
    """The block that holds the program: the last closed, non-blank Python block."""
    programs = [
        block
        for block in fenced_blocks(answer)
        if block.is_closed and block.language in PYTHON_LANGUAGE_TAGS and block.body.strip()
    ]
    return programs[-1] if programs else None


def extract_program(text: str) -> str | None:
    """The program of a response: the last fenced Python code block of its answer part.

    Decisions beyond docs/method.md's "last fenced code block":
    - Only untagged blocks and blocks tagged python/python3/py/py3 count (see
      `PYTHON_LANGUAGE_TAGS`): a trailing ```text block of sample output is not a program.
    - An unterminated fence is not a block. It means the answer was cut off (max_tokens),
      and a truncated program would only earn a misleading SyntaxError. An earlier, closed
      block is then the answer's last complete program and is the one returned, as in the
      research code (whose regex skips an unterminated final fence the same way).
    - A block whose body is blank is skipped.
    - Blocks inside the thinking are never considered: only the answer part is searched.

    Args:
        text: A raw model response.

    Returns:
        The block's body (its lines, newline-terminated), or None when the answer part
        has no such block.
    """
    block = _program_block(answer_part(text))
    return block.body if block is not None else None


def history_text(text: str, cap_chars: int = HISTORY_CAP_CHARS) -> str:
    """What an assistant turn leaves in the conversation: its answer part, capped.

    When the answer part is longer than `cap_chars`, its END is kept. The program (the
    last code block) comes at the end of an answer, and the next turn's feedback is about
    that program: keeping the start (as the research code did) cuts the program off and
    leaves the model fixing code it can no longer see. The explanation before the program
    is what is lost, and it is the least useful part for the next turn.

    If the cut lands inside an earlier code block, the rest of that block is dropped too:
    a kept closing fence without its opening one would flip which text reads as code and
    which as prose for everything after it. Only when the program block alone is longer
    than the cap is the cut made inside it (keeping the program's end).

    Args:
        text: A raw model response.
        cap_chars: The most characters kept; 0 keeps nothing.

    Returns:
        The answer part, stripped of surrounding whitespace, at most `cap_chars` long.

    Raises:
        ValueError: `cap_chars` is negative.
    """
    if cap_chars < 0:
        raise ValueError(f"cap_chars must be 0 or more, not {cap_chars}")
    answer = answer_part(text).strip()
    if len(answer) <= cap_chars:
        return answer
    cut = len(answer) - cap_chars
    program = _program_block(answer)
    for block in fenced_blocks(answer):
        if block.start < cut < block.end and block != program:
            cut = block.end
            break
    return answer[cut:].lstrip()
