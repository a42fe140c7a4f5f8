"""Prompt templates: the words of a rollout, in files of the project's own wording.

A template is a TOML file. Bundled ones live in `templates/` and are named by their stem
(`default`, `reasoning`); any other file is named by its path. It holds:

    system                   optional system message
    [first_turn]
    user                     turn 0's user message: {statement} {test_style} {starter_code}
    stdin_style              how a stdin/stdout problem is run (fills {test_style})
    call_style               how a function-call problem is run: {fn_name}
    starter_code             shown only when the problem has starter code: {code}
    [feedback]
    wrapper                  wraps a failing-test report: {report}
    wrong_output             a test whose output was wrong: {verdict} {input} {output}
                             {expected} {error}
    error                    a crash or a limit: the same placeholders
    all_passed               every public test passed
    no_public_tests          (optional) the problem has no public test, so none ran
    no_code                  the answer had no code block

Every value is a `str.format` string ({{ and }} are literal braces), surrounding
whitespace is dropped, and a section that does not apply (no starter code) disappears
together with the blank lines before it. Loading refuses a missing key, an unknown key (a
typo would otherwise silently drop a message), an unknown placeholder and a missing
required one, so a bad template fails when a run is created, not halfway through it.
Every run stores the template's name and the sha256 of its bytes, and a job refuses to
continue a run whose template file changed since.
"""

from __future__ import annotations

import hashlib
import re
import string
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cobalt.shared.contracts import CallTest, ProblemRow, TestStyle
from cobalt.shared.errors import InvalidInput

__all__ = [
    "BUNDLED_TEMPLATES_DIR",
    "FailedTestReport",
    "PromptTemplate",
    "TemplateError",
    "bundled_template_names",
    "check_bundled_name",
]

BUNDLED_TEMPLATES_DIR = Path(__file__).with_name("templates")
"""Folder of the bundled templates (shipped as package data)."""

_BARE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_ABSENT_SECTION = "\x00"
"""Stands in for a section that does not apply until it is removed with the blank lines
before it (problem text holds no NUL characters, so nothing else is removed)."""
_ABSENT_SECTION_WITH_GAP = re.compile(r"\n*\x00")
_REPORT_FIELDS = frozenset({"verdict", "input", "output", "expected", "error"})


class TemplateError(InvalidInput):
    """A prompt template that cannot be used: missing, unreadable or malformed."""


@dataclass(frozen=True, slots=True)
class _KeySpec:
    """One key of a template file: where it goes and which placeholders it may use."""

    key: str
    attribute: str
    placeholders: frozenset[str] = frozenset()
    required_placeholders: frozenset[str] = frozenset()
    is_optional: bool = False


_KEY_SPECS = (
    _KeySpec("system", "system", is_optional=True),
    _KeySpec(
        "first_turn.user",
        "first_user",
        frozenset({"statement", "test_style", "starter_code"}),
        frozenset({"statement"}),
    ),
    _KeySpec("first_turn.stdin_style", "stdin_style"),
    _KeySpec("first_turn.call_style", "call_style", frozenset({"fn_name"})),
    _KeySpec("first_turn.starter_code", "starter_code", frozenset({"code"}), frozenset({"code"})),
    _KeySpec("feedback.wrapper", "feedback_wrapper", frozenset({"report"}), frozenset({"report"})),
    _KeySpec("feedback.wrong_output", "wrong_output_report", _REPORT_FIELDS),
    _KeySpec("feedback.error", "error_report", _REPORT_FIELDS),
    _KeySpec("feedback.all_passed", "all_passed"),
    _KeySpec("feedback.no_code", "no_code"),
    _KeySpec("feedback.no_public_tests", "no_public_tests", is_optional=True),
)

NO_PUBLIC_TESTS = (
    "No public test ran: this problem has none, so nothing checked your program. Check it "
    "yourself against the statement and its examples (including edge cases), then reply with "
    "the complete final program in a single ```python code block."
)
"""`feedback.no_public_tests` where a template leaves it out: a bundled template's text
stays as the runs that stored its sha256 read it."""


@dataclass(frozen=True, slots=True)
class FailedTestReport:
    """A failing public test as the feedback shows it; each field is already cut to size.

    Built by `cobalt.orchestrator.rollouts.feedback`; rendered by
    `PromptTemplate.feedback_message`.
    """

    verdict: str
    """A short description of the verdict ("wrong answer", "time limit exceeded")."""
    input: str
    """The test's stdin, or the call for a call-style test."""
    output: str
    """What the program printed, or returned for a call-style test."""
    expected: str
    error: str
    """The error output (stderr, or the executor's explanation when there is none)."""
    is_wrong_output: bool
    """True when the program ran to the end with a wrong result (compare outputs);
    False for a crash or a limit (show the error instead)."""


def bundled_template_names() -> list[str]:
    """Names of the templates that ship with Cobalt, sorted."""
    return sorted(path.stem for path in BUNDLED_TEMPLATES_DIR.glob("*.toml"))


def check_bundled_name(name: str) -> None:
    """Refuse anything but the name of a bundled template, without touching the disk.

    What a remote caller (the REST API) may name: the server's own registry. The message
    lists the registry and says nothing about any file, so the API cannot be used to probe
    the server's file system.

    Raises:
        TemplateError: `name` is not a bundled template's name.
    """
    names = bundled_template_names()
    if name not in names:
        raise TemplateError(
            f"no template named {name[:100]!r}; the server's templates: {', '.join(names)} "
            "(a request names one of these; template files are for the CLI)"
        )


def _template_path(name_or_path: str | Path) -> Path:
    """A bare name means a bundled template; anything path-like is a file of the user's."""
    text = str(name_or_path)
    is_path = isinstance(name_or_path, Path) or "/" in text or "\\" in text
    if is_path or text.endswith(".toml"):
        return Path(text).expanduser()
    if not _BARE_NAME.fullmatch(text):
        raise TemplateError(
            f"{text!r} is neither a bundled template name ({', '.join(bundled_template_names())})"
            " nor a path to a .toml file"
        )
    return BUNDLED_TEMPLATES_DIR / f"{text}.toml"


def _flatten(table: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, value in table.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value


def _placeholders(text: str) -> set[str]:
    """The field names a format string refers to; ValueError when it is malformed."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def _checked_value(spec: _KeySpec, value: object, source: Path) -> str:
    """A template value after every check its key asks for."""
    if not isinstance(value, str) or (not spec.is_optional and not value.strip()):
        raise TemplateError(f"prompt template {source}: {spec.key!r} must be a non-empty string")
    try:
        used = _placeholders(value)
    except ValueError as exc:
        raise TemplateError(
            f"prompt template {source}: {spec.key!r} is not a valid format string ({exc}); "
            "write literal braces as {{ and }}"
        ) from exc
    allowed = ", ".join("{" + name + "}" for name in sorted(spec.placeholders)) or "none"
    unknown = used - spec.placeholders
    if unknown:
        raise TemplateError(
            f"prompt template {source}: {spec.key!r} uses unknown placeholder(s) "
            f"{', '.join('{' + name + '}' for name in sorted(unknown))}; allowed: {allowed}"
        )
    missing = spec.required_placeholders - used
    if missing:
        raise TemplateError(
            f"prompt template {source}: {spec.key!r} must contain "
            f"{', '.join('{' + name + '}' for name in sorted(missing))}"
        )
    return value


def _parse(raw: bytes, source: Path) -> dict[str, str]:
    """Template values by attribute name, from a template file's bytes."""
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TemplateError(f"prompt template {source} is not valid UTF-8 TOML: {exc}") from exc
    flat = dict(_flatten(data))
    known = {spec.key for spec in _KEY_SPECS}
    unknown = sorted(set(flat) - known)
    if unknown:
        raise TemplateError(
            f"prompt template {source} has unknown key(s) {', '.join(unknown)}; "
            f"known keys: {', '.join(sorted(known))}"
        )
    values: dict[str, str] = {}
    for spec in _KEY_SPECS:
        if spec.key not in flat:
            if spec.is_optional:
                continue
            raise TemplateError(f"prompt template {source} is missing the key {spec.key!r}")
        value = _checked_value(spec, flat[spec.key], source)
        # A value without placeholders is final text: render its {{ }} escapes once, here.
        values[spec.attribute] = value if spec.placeholders else value.format().strip()
    return values


def _function_name(problem: ProblemRow) -> str:
    """The function a call-style problem's tests call."""
    if problem.fn_name:
        return problem.fn_name
    for test in [*problem.public_tests, *problem.hidden_tests]:
        if isinstance(test, CallTest):
            return test.fn_name
    raise InvalidInput(
        f"problem {problem.external_id!r} is call-style but names no function; set its fn_name"
    )


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """A loaded prompt template. Build it with `PromptTemplate.load`."""

    name: str
    """What the template was loaded by (a bundled name or a path); runs store it."""
    path: Path
    sha256: str
    """Hex sha256 of the file's bytes; runs store it to detect a changed template."""
    first_user: str
    stdin_style: str
    call_style: str
    starter_code: str
    feedback_wrapper: str
    wrong_output_report: str
    error_report: str
    all_passed: str
    """The whole feedback message when every public test passed."""
    no_code: str
    """The whole feedback message when the answer had no code block."""
    system: str | None = None
    no_public_tests: str = NO_PUBLIC_TESTS
    """The whole feedback message when the problem has no public test (never
    `all_passed`: that would claim tests passed that do not exist)."""

    @classmethod
    def load(cls, name_or_path: str | Path) -> PromptTemplate:
        """Load and check a bundled template by name (`default`) or a template file.

        Args:
            name_or_path: A bundled template's name, or a path (anything with a slash or
                ending in .toml) to a template file.

        Returns:
            The checked template.

        Raises:
            TemplateError: The template does not exist, is not valid TOML, or has a
                missing or unknown key, an unknown placeholder or a missing required one.
        """
        path = _template_path(name_or_path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise TemplateError(
                f"prompt template {str(name_or_path)!r} cannot be read ({exc.strerror}); "
                f"bundled: {', '.join(bundled_template_names())}, or give a path to a "
                ".toml file"
            ) from exc
        values = _parse(raw, path)
        system = values.pop("system", None)
        if not values.get("no_public_tests"):
            values.pop("no_public_tests", None)
        return cls(
            name=str(name_or_path),
            path=path,
            sha256=hashlib.sha256(raw).hexdigest(),
            system=system or None,
            **values,
        )

    def initial_messages(self, problem: ProblemRow) -> list[dict[str, str]]:
        """The chat messages of turn 0 for `problem` (OpenAI format).

        Raises:
            InvalidInput: A call-style problem names no function to write.
        """
        if problem.test_style == TestStyle.CALL:
            test_style = self.call_style.format(fn_name=_function_name(problem))
        else:
            test_style = self.stdin_style
        starter = problem.starter_code.strip("\n").rstrip()
        user = self.first_user.format(
            statement=problem.statement.strip(),
            test_style=test_style.strip(),
            starter_code=self.starter_code.format(code=starter).strip()
            if starter
            else _ABSENT_SECTION,
        )
        user = _ABSENT_SECTION_WITH_GAP.sub("", user).strip()
        system = [{"role": "system", "content": self.system}] if self.system else []
        return [*system, {"role": "user", "content": user}]

    def feedback_message(self, report: FailedTestReport) -> str:
        """The feedback message about one failing public test."""
        layout = self.wrong_output_report if report.is_wrong_output else self.error_report
        body = layout.format(
            verdict=report.verdict,
            input=report.input,
            output=report.output,
            expected=report.expected,
            error=report.error,
        )
        return self.feedback_wrapper.format(report=body.strip()).strip()
