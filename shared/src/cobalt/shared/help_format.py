"""Help that wraps long option names instead of cutting them.

typer's help draws each option's names in a table column that rich narrows with "…"
when the terminal is too narrow for every column: `train start --help` at 120 columns
read `--no-stop-on-p…` and `--no-activation-checkpoi…`, names no one can type. The
names are drawn by typer's option highlighters; these subclasses mark each name they
draw as folded, so a name too long for its column goes on over the next line whole.
"""

from __future__ import annotations

from rich.highlighter import RegexHighlighter
from rich.text import Text

__all__ = ["fold_option_names"]


def fold_option_names() -> None:
    """Make typer's help fold the option names it cannot fit (idempotent)."""
    from typer import rich_utils

    for name in ("highlighter", "negative_highlighter"):
        current = getattr(rich_utils, name)
        if not isinstance(current, _Folding):
            setattr(rich_utils, name, _folding(type(current))())


class _Folding:
    """Marks a highlighter whose text folds."""


def _folding(highlighter: type[RegexHighlighter]) -> type[RegexHighlighter]:
    class Folding(highlighter, _Folding):  # type: ignore[misc,valid-type]
        def highlight(self, text: Text) -> None:
            super().highlight(text)
            text.overflow = "fold"

    return Folding
