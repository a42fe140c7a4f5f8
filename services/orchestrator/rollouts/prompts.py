"""Prompt templates: files in the project's own words, chosen per run, hashed per run.

A template is a TOML file (bundled ones live in `templates/`; a path names your own) with
the system message, the first user message for stdin-style and call-style problems, the
two feedback messages (a wrong answer, a crash or limit) and the all-passed and no-code
messages. Every run stores the template's name and the sha256 of its bytes, and a job
refuses to continue a run whose template file has changed since.
"""

from __future__ import annotations

import hashlib
import string
import tomllib
from dataclasses import dataclass
from pathlib import Path

from cobalt.shared.contracts import ProblemRow, TestStyle
from cobalt.shared.errors import InvalidInput

__all__ = ["BUNDLED", "PromptTemplate", "TemplateError"]

BUNDLED = Path(__file__).with_name("templates")
"""Folder of the bundled templates (`default`, ...)."""

_FIRST = {"statement", "starter_code", "fn_name"}
_FEEDBACK = {"verdict", "input", "output", "expected", "error"}
_FIELDS: dict[str, set[str]] = {
    "first_stdin": _FIRST,
    "first_call": _FIRST,
    "failed_test": _FEEDBACK,
    "crashed_test": _FEEDBACK,
    "all_passed": set(),
    "no_code": set(),
}


class TemplateError(InvalidInput):
    """A prompt template that cannot be used (missing, unreadable, wrong placeholders)."""


def _placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    name: str
    sha256: str
    system: str | None
    first_stdin: str
    first_call: str
    failed_test: str
    crashed_test: str
    all_passed: str
    no_code: str

    @classmethod
    def load(cls, name_or_path: str) -> PromptTemplate:
        """A bundled template by name (`default`) or a template file by path."""
        path = Path(name_or_path)
        if path.suffix != ".toml" and "/" not in name_or_path:
            path = BUNDLED / f"{name_or_path}.toml"
        try:
            raw = path.read_bytes()
        except OSError as exc:
            bundled = ", ".join(sorted(p.stem for p in BUNDLED.glob("*.toml")))
            raise TemplateError(
                f"prompt template {name_or_path!r} not found ({exc.strerror}); bundled: "
                f"{bundled}, or give a path to a .toml file"
            ) from exc
        try:
            data = tomllib.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise TemplateError(f"prompt template {path} is not valid TOML: {exc}") from exc
        values: dict[str, str] = {}
        for key, allowed in _FIELDS.items():
            value = data.get(key)
            if not isinstance(value, str) or not value.strip():
                raise TemplateError(f"prompt template {path} needs a non-empty string {key!r}")
            unknown = _placeholders(value) - allowed
            if unknown:
                raise TemplateError(
                    f"prompt template {path}: {key!r} uses unknown placeholder(s) "
                    f"{', '.join(sorted(unknown))}; allowed: {', '.join(sorted(allowed)) or 'none'}"
                )
            values[key] = value
        system = data.get("system")
        if system is not None and not isinstance(system, str):
            raise TemplateError(f"prompt template {path}: 'system' must be a string")
        return cls(
            name=name_or_path,
            sha256=hashlib.sha256(raw).hexdigest(),
            system=system or None,
            **values,
        )

    def initial_messages(self, problem: ProblemRow) -> list[dict[str, str]]:
        """The chat messages of turn 0 for a problem."""
        starter = (
            f"\nStart from this code:\n```python\n{problem.starter_code.rstrip()}\n```\n"
            if problem.starter_code.strip()
            else ""
        )
        text = self.first_call if problem.test_style == TestStyle.CALL else self.first_stdin
        user = text.format(
            statement=problem.statement.strip(),
            starter_code=starter,
            fn_name=problem.fn_name or "",
        ).strip()
        messages = [{"role": "system", "content": self.system}] if self.system else []
        return [*messages, {"role": "user", "content": user}]
